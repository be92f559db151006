package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
)

// The seeded agent's id, the model the assemblies name and their budget.
const (
	agentID   = "support_agent"
	model     = "gpt-4o"
	maxTokens = 4000
)

// fixture names the state seeded for one tenant: one agent, and per session a user of its own.
type fixture struct {
	tenant   string
	agent    string
	sessions []string
	users    []string // users[i] talks in sessions[i]
}

// userSentences and agentSentences make up the seeded conversations: a customer of a SaaS product and its
// support assistant.
var (
	userSentences = []string{
		"Hi, I was charged twice for the premium plan this month.",
		"Can you tell me how much the premium plan costs if I pay yearly?",
		"Our team grew to twelve people, do we need to change our subscription?",
		"The export to CSV has been stuck at 90% for an hour now.",
		"I tried resetting my password but the email never arrived.",
		"Is there a way to move my workspace to the EU data region?",
		"We use the API from a nightly job and started getting 429 errors yesterday.",
		"How do I give a contractor read-only access to one project?",
		"The invoice shows the wrong company address, can it be corrected?",
		"Thanks, that worked. One more question about the audit log.",
		"Could you check whether my last payment went through?",
		"Our SSO login fails with an error about the certificate.",
		"What happens to our data if we downgrade to the free tier?",
		"I need the invoices for the last three months for our accountant.",
		"The mobile app logs me out every time I switch networks.",
	}
	agentSentences = []string{
		"I'm sorry about that, let me look into your account.",
		"The premium plan is $49 per seat per month, or $470 per seat per year.",
		"I can see two charges on the 3rd; the second one is a pending authorization that will drop off within five days.",
		"With twelve people you are above the starter limit of ten seats, so the team plan would fit better.",
		"Exports of more than 50,000 rows run in the background; you will get an email with the file when it is done.",
		"Password reset emails sometimes land in spam; I have sent a new link to the address on file.",
		"Data residency can be changed by an owner under Settings, then Workspace, then Region; the move takes about an hour.",
		"The API allows 600 requests per minute per token; spreading the nightly job over a few minutes avoids the 429s.",
		"You can invite the contractor as a guest and grant the Viewer role on that project only.",
		"I have corrected the billing address; the next invoice will show it, and I can reissue the last one.",
		"Your payment of $588 on the 1st was successful.",
		"The SSO error usually means the identity provider rotated its signing certificate; upload the new one under Security.",
		"On the free tier your data stays, but projects over the limit become read-only.",
		"I have emailed the three invoices as PDFs to the billing contact.",
		"Please update the app to version 4.2, which fixes the session handling on network changes.",
		"Is there anything else I can help you with today?",
	}
	factValues = []struct{ key, value string }{
		{"name", "Bob Martinez"},
		{"plan", "premium, 12 seats, billed monthly"},
		{"company", "Northwind Analytics GmbH"},
		{"region", "EU (Frankfurt)"},
		{"preferred_language", "English, replies short and to the point"},
		{"timezone", "Europe/Berlin"},
		{"last_ticket", "double charge on the premium plan, resolved"},
		{"sso", "Okta, SAML, certificate rotated yearly in March"},
	}
)

// sentences joins one to four random sentences of pool.
func sentences(rng *rand.Rand, pool []string) string {
	n := 1 + rng.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = pool[rng.IntN(len(pool))]
	}
	return strings.Join(parts, " ")
}

// conversation returns n messages of a support chat: user and assistant turns, with a tool call and its
// result now and then.
func conversation(rng *rand.Rand, session string, n int) []map[string]any {
	msgs := make([]map[string]any, 0, n)
	for i := 0; len(msgs) < n; i++ {
		switch {
		case i%2 == 0:
			msgs = append(msgs, map[string]any{"role": "user", "content": sentences(rng, userSentences)})
		case i%10 == 5 && n-len(msgs) >= 3:
			id := fmt.Sprintf("call_%s_%d", session, i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": "Let me check your account.", "tool_calls": []map[string]any{{
					"id": id, "type": "function",
					"function": map[string]any{"name": "check_account", "arguments": `{"user_id":"bob","fields":["plan","payments"]}`},
				}}},
				map[string]any{"role": "tool", "tool_call_id": id,
					"content": `{"plan":"premium","seats":12,"last_payment":{"amount":588,"currency":"USD","status":"succeeded"}}`},
				map[string]any{"role": "assistant", "content": sentences(rng, agentSentences)})
		default:
			msgs = append(msgs, map[string]any{"role": "assistant", "content": sentences(rng, agentSentences)})
		}
	}
	return msgs[:n]
}

// agentConfig is the seeded agent.
func agentConfig() map[string]any {
	return map[string]any{
		"instructions":  "You are the support assistant of Acme Cloud. Answer billing and account questions using the customer's memory, the tool results and the knowledge provided.",
		"constraints":   "Never reveal other customers' data. Never promise refunds above $100 without a human.",
		"output_format": "Short paragraphs; cite knowledge as [n].",
		"model":         model,
		"tools": []map[string]any{
			{"type": "function", "function": map[string]any{"name": "check_account", "description": "Look up a customer's plan and payments.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"user_id": map[string]any{"type": "string"},
					"fields": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}, "required": []string{"user_id"}}}},
			{"type": "function", "function": map[string]any{"name": "search_docs", "description": "Search the help center.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}}},
		},
	}
}

// knowledgeItems returns the pre-retrieved knowledge of a session.
func knowledgeItems() []map[string]any {
	docs := []struct{ id, content string }{
		{"pricing#premium", "Premium costs $49 per seat per month billed monthly, or $470 per seat per year billed yearly. Seats can be added at any time and are prorated."},
		{"pricing#team", "The team plan starts at ten seats and includes SSO, audit logs and a 99.9% uptime commitment."},
		{"billing#double-charge", "A second charge shortly after a payment is usually a card authorization; it is released by the bank within 3 to 5 business days."},
		{"api#limits", "Each API token may make 600 requests per minute; responses over the limit are 429 with a Retry-After header."},
		{"security#sso", "When the identity provider rotates its SAML signing certificate, upload the new certificate under Settings, Security."},
	}
	items := make([]map[string]any, len(docs))
	for i, d := range docs {
		items[i] = map[string]any{"id": d.id, "document_id": strings.Split(d.id, "#")[0], "content": d.content,
			"score": 0.9 - 0.1*float64(i), "source": "https://help.acme.example/" + d.id}
	}
	return items
}

// seedTenant stores the agent, and per session a user's memory, messages conversation messages (in
// batches), tool outputs and knowledge, through c.
func seedTenant(ctx context.Context, c *client, tenant string, sessions, messages int, seed uint64) (fixture, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	fx := fixture{tenant: tenant, agent: agentID}
	if err := c.call(ctx, "PUT", "/v1/agents/"+agentID, agentConfig(), nil); err != nil {
		return fx, fmt.Errorf("seed %s: %w", tenant, err)
	}
	for i := range sessions {
		session, user := fmt.Sprintf("sess_%d", i), fmt.Sprintf("user_%d", i)
		if err := seedSession(ctx, c, rng, session, user, messages); err != nil {
			return fx, fmt.Errorf("seed %s: %w", tenant, err)
		}
		fx.sessions, fx.users = append(fx.sessions, session), append(fx.users, user)
	}
	return fx, nil
}

// seedSession stores one user's memory and one session's messages, tool outputs and knowledge.
func seedSession(ctx context.Context, c *client, rng *rand.Rand, session, user string, messages int) error {
	for i, f := range factValues {
		body := map[string]any{"value": f.value, "pinned": i < 2, "source": "crm"}
		if err := c.call(ctx, "PUT", "/v1/users/"+user+"/memory/"+url.PathEscape(f.key), body, nil); err != nil {
			return err
		}
	}
	msgs := conversation(rng, session, messages)
	for start := 0; start < len(msgs); start += 50 {
		batch := map[string]any{"messages": msgs[start:min(start+50, len(msgs))]}
		if err := c.call(ctx, "POST", "/v1/sessions/"+session+"/messages", batch, nil); err != nil {
			return err
		}
	}
	for i := range 3 {
		out := map[string]any{"tool": "check_account", "call_id": fmt.Sprintf("call_seed_%d", i), "args": `{"user_id":"bob"}`,
			"result": fmt.Sprintf(`{"plan":"premium","seats":%d,"invoices":["INV-%04d","INV-%04d"],"balance":"0.00"}`, 10+i, 100+i, 200+i)}
		if err := c.call(ctx, "POST", "/v1/sessions/"+session+"/tool-outputs", out, nil); err != nil {
			return err
		}
	}
	return c.call(ctx, "PUT", "/v1/sessions/"+session+"/knowledge", map[string]any{"knowledge": knowledgeItems()}, nil)
}

// assembleBody is the body of an assembly from a fixture's stored state, for session i.
func assembleBody(fx fixture, i int, strict bool) map[string]any {
	return map[string]any{"agent": fx.agent, "user": fx.users[i], "session": fx.sessions[i],
		"message": "How much does premium cost for twelve seats, billed yearly?", "model": model, "max_tokens": maxTokens,
		"strict": strict}
}
