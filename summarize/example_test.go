package summarize_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/context-loom/loom/summarize"
)

// A summarizer over a Chat Completions server (here a stand-in; in use, OpenAI, Ollama, vLLM or LM Studio).
func ExampleNewOpenAI() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"choices":[{"message":{"content":"The user wants a refund for order 42."},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	s, err := summarize.NewOpenAI(summarize.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "llama3.2"})
	if err != nil {
		panic(err)
	}
	summary, err := s.Summarize(context.Background(), summarize.Request{
		Instructions: "Summarize the conversation.", Text: "User: I want a refund for order 42.", MaxOutputTokens: 200})
	fmt.Println(summary, err)
	// Output: The user wants a refund for order 42. <nil>
}
