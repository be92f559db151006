// SPDX-License-Identifier: Apache-2.0

package promptcount_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/context-loom/loom/promptcount"
)

// The OpenAI Cookbook's request with a tool ("How to count tokens with tiktoken"), which the API billed
// 105 prompt tokens for gpt-4: its tool counted as the namespace the model reads.
func ExampleCountRequest() {
	body := `{"model": "gpt-4", "messages": [
		{"role": "system", "content": "You are a helpful assistant that can answer to questions about the weather."},
		{"role": "user", "content": "What's the weather like in San Francisco?"}],
	  "tools": [{"type": "function", "function": {"name": "get_current_weather",
		"description": "Get the current weather in a given location",
		"parameters": {"type": "object", "properties": {
			"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
			"unit": {"type": "string", "description": "The unit of temperature to return", "enum": ["celsius", "fahrenheit"]}},
		  "required": ["location"]}}}]}`
	c, err := promptcount.CountRequest(context.Background(), []byte(body), promptcount.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Tokens, c.Exact, c.Tools.Tokens, len(c.Messages), c.ReplyPriming)
	// Output: 105 true 71 2 3
}

// A Messages API body for a Claude model is estimated; with an Anthropic key, a Provider asks
// Anthropic's count_tokens (here a local server that stands in for it) for the exact count.
func ExampleNewProvider() {
	anthropic := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"input_tokens": 14}`)
	}))
	defer anthropic.Close()
	p, err := promptcount.NewProvider(promptcount.ProviderConfig{AnthropicKey: "sk-ant-...", AnthropicURL: anthropic.URL})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "Be brief.",
		"messages": [{"role": "user", "content": "Hello, Claude"}]}`)
	estimate, _ := promptcount.CountRequest(context.Background(), body, promptcount.Options{})
	exact, _ := promptcount.CountRequest(context.Background(), body, promptcount.Options{Provider: p})
	fmt.Println(estimate.Approximate, estimate.Source)
	fmt.Println(exact.Tokens, exact.Exact, exact.Source, exact.Estimate == estimate.Tokens)
	// Output:
	// true tokenizer
	// 14 true anthropic true
}
