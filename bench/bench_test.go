package bench

import (
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
	tiktokengo "github.com/tiktoken-go/tokenizer"
)

// TestPeerAgreesOnPlainText checks that the benchmarks compare like with like: on plain English both
// tokenizers count the same, so the peer's speed is measured on the same work.
func TestPeerAgreesOnPlainText(t *testing.T) {
	peer, err := tiktokengo.Get(tiktokengo.Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog, twice. ", 50)
	want, _ := peer.Count(text)
	if got := tokenizer.CL100K().Count(text); got != want {
		t.Errorf("loom counts %d, tiktoken-go %d", got, want)
	}
}
