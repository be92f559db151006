package tokenizer_test

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

var updateEstimateRule = flag.Bool("update", false, "rewrite testdata/estimate_rule.txt for a new tokenizer.EstimateKey")

// estimateRuleFile pins the counts of the rule named by tokenizer.EstimateKey.
var estimateRuleFile = filepath.Join("testdata", "estimate_rule.txt")

// estimateRuleTexts are the texts whose estimates pin the rule: each file of the corpus, whole and by
// its first lines, and strings drawn at random (from a fixed seed) from characters of every class the
// rule prices, so that a change of any weight or class changes some count.
func estimateRuleTexts(t *testing.T) (names, texts []string) {
	for _, name := range corpusFiles {
		text := readCorpus(t, name)
		names, texts = append(names, "corpus/"+name), append(texts, text)
		for i, line := range strings.SplitN(text, "\n", 41)[:40] {
			names, texts = append(names, fmt.Sprintf("corpus/%s:%d", name, i+1)), append(texts, line+"\n")
		}
	}
	alphabet := []string{"a", "z", "Q", "é", "ß", "ą", "İ", "ж", "Ж", "λ", "א", "ب", "क", "ि", "\u0301", "ก", "ລ", "ក", "မ",
		"0", "7", "٣", "१", ".", ",", "!", "(", "{", "«", "—", "、", "。", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2028", "\u0085",
		"中", "あ", "カ", "한", "ᄀ", "😀", "🏽", "🇫", "\u200d", "\ufe0f", "\U000e0100", "→", "€", "\x00", "\x7f", "\xff", "\xe4\xb8"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		var b strings.Builder
		for range 1 + r.IntN(24) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		names, texts = append(names, "random:"+strconv.Itoa(i)), append(texts, b.String())
	}
	return names, texts
}

// TestEstimateKey_NamesTheRule checks that the estimates of fixed texts are those that
// testdata/estimate_rule.txt recorded under tokenizer.EstimateKey: a count cached under the key is then
// the count Estimate gives today. A rule that counts otherwise needs a new key (and the file made again
// with -update), or stores would serve counts of the old rule as the new one's.
func TestEstimateKey_NamesTheRule(t *testing.T) {
	t.Parallel()
	names, texts := estimateRuleTexts(t)
	var want strings.Builder
	want.WriteString("# Estimate's counts of fixed texts (see estimate_rule_test.go) under the key of its rule.\n")
	want.WriteString("# A rule that counts any of them otherwise needs a new tokenizer.EstimateKey: change it, then\n")
	want.WriteString("# go test ./tokenizer -run TestEstimateKey_NamesTheRule -update\n")
	want.WriteString("key " + tokenizer.EstimateKey + "\n")
	for i, text := range texts {
		line := strconv.Quote(text)
		if i < len(corpusFiles)*41 && i%41 == 0 { // a whole file
			line = strconv.Itoa(len(text)) + " bytes"
		}
		fmt.Fprintf(&want, "%d\t%s\t%s\n", tokenizer.Estimate(text), names[i], line)
	}
	recordedKey, recorded := readEstimateRule(t)
	if recordedKey == tokenizer.EstimateKey {
		if recorded != want.String() {
			t.Fatalf("Estimate counts otherwise than %s recorded for its key %s: the rule changed, so EstimateKey must change too (then -update)\n%s",
				estimateRuleFile, recordedKey, firstDiff(recorded, want.String()))
		}
		return
	}
	if !*updateEstimateRule {
		t.Fatalf("%s records key %q, EstimateKey is %q: run with -update", estimateRuleFile, recordedKey, tokenizer.EstimateKey)
	}
	if err := os.WriteFile(estimateRuleFile, []byte(want.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readEstimateRule returns the key that testdata/estimate_rule.txt records and the file's text ("" for a
// missing file).
func readEstimateRule(t *testing.T) (key, text string) {
	data, err := os.ReadFile(estimateRuleFile)
	if os.IsNotExist(err) {
		return "", ""
	}
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "key "); ok {
			return k, string(data)
		}
	}
	return "", string(data)
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n recorded %s\n now      %s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("recorded %d lines, now %d", len(g), len(w))
}
