package assembler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestAssemble_MessagesAreAnArray: the openai and anthropic outputs carry their messages as an array (the
// Messages API and Chat Completions both require one, of at least one message: a request with none to send
// is ErrNoMessages, see TestAnthropic_TheThreeRejectedRequests); the text format has none.
func TestAssemble_MessagesAreAnArray(t *testing.T) {
	t.Parallel()
	for _, format := range []string{FormatAnthropic, FormatOpenAI, FormatText} {
		for _, req := range []Request{{Instructions: "Be brief.", Message: "Hi."}, {Message: "Hi."}, {Instructions: "Be brief."}} {
			req.Format = format
			res, err := AssembleRequest(context.Background(), &req)
			if format == FormatAnthropic && req.Message == "" {
				if !errors.Is(err, ErrNoMessages) {
					t.Errorf("anthropic, instructions alone: %v, want ErrNoMessages", err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			var out map[string]json.RawMessage
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			msgs, ok := out["messages"]
			switch {
			case format == FormatText && ok:
				t.Errorf("text, %+v: messages %s, want none", req, msgs)
			case format != FormatText && (!ok || !strings.HasPrefix(string(msgs), "[{")):
				t.Errorf("%s, %+v: messages %s, want an array of messages", format, req, msgs)
			}
		}
	}
}

// TestAssemble_ToolExchangeWithoutAUserTurn: the latest tool exchange is required, and a conversation starts
// with the user (issue 4; Anthropic enforces it). A history whose required exchange has no user message
// before it is the same typed error in every format, naming the problem, not an assistant-first output in
// one format and an error in another.
func TestAssemble_ToolExchangeWithoutAUserTurn(t *testing.T) {
	t.Parallel()
	call := Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: ToolCallFunction{Name: "lookup", Arguments: `{"q":"x"}`}}}}
	result := Message{Role: "tool", ToolCallID: "c1", Content: "found it"}
	for _, format := range []string{FormatOpenAI, FormatAnthropic, FormatText, FormatResponses, FormatGemini} {
		for _, message := range []string{"", "What did you find?"} {
			for _, history := range [][]Message{
				{call, result},
				{{Role: "system", Content: "Be brief."}, call, result},
				{{Role: "assistant", Content: "Hello!"}, call, result},
			} {
				req := &Request{Format: format, Instructions: "Be helpful.", History: history, Message: message}
				_, err := AssembleRequest(context.Background(), req)
				if !errors.Is(err, ErrNoUserTurn) || !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "history[") {
					t.Errorf("%s, message %q, %d messages: %v, want ErrNoUserTurn naming the history index", format, message, len(history), err)
				}
			}
		}
		// With the user's request before it, the exchange is kept, from the user's message on.
		req := &Request{Format: format, History: []Message{{Role: "user", Content: "Look it up."}, call, result}}
		if _, err := AssembleRequest(context.Background(), req); err != nil {
			t.Errorf("%s: an exchange after the user's request: %v", format, err)
		}
		// An older exchange without a user turn is not required: it is dropped as orphaned, not an error.
		old := &Request{Format: format, History: []Message{call, result, {Role: "user", Content: "Thanks."}, {Role: "assistant", Content: "You're welcome."}}, Message: "Bye."}
		res, err := AssembleRequest(context.Background(), old)
		if err != nil {
			t.Errorf("%s: an old exchange without a user turn: %v", format, err)
			continue
		}
		for _, r := range res.Report.Regions {
			if r.Name == RegionHistory && (len(r.Dropped) != 2 || r.Dropped[0].Reason != ReasonOrphan) {
				t.Errorf("%s: history dropped %+v, want the old exchange as orphaned", format, r.Dropped)
			}
		}
	}
}
