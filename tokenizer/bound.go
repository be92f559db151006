package tokenizer

import "math"

// LowerBound returns a lower bound on the count of the parts' texts joined, from one scan of their bytes,
// for knowledge that cannot fit: counting a text only to learn that it is too long is most of the counting
// a budget planner would do. With limit >= 0 it stops once the bound exceeds limit (returning a number
// above limit), and returns 0 at once for texts too short to exceed it. The parts' Tokens are not read.
//
// The bound is a count of letter runs. The pre-tokenizers of cl100k_base and o200k_base put the letters of
// one piece in one run of letters and marks, but for a contraction ('s, 't, 're, 've, 'm, 'll, 'd) after an
// apostrophe; and every piece is at least one token. So count the runs of word bytes (ASCII letters, and
// every byte of a non-ASCII character: letters, marks and more, so runs are only ever longer than the
// tokenizer's) that hold an ASCII letter and do not follow an apostrophe: two such runs have their ASCII
// letters in different pieces, and the text has at least that many tokens. A text of b bytes has at most
// (b+1)/2 runs.
//
// Separators are the other bytes: ASCII digits, punctuation, whitespace and controls. Inserting
// separators, or replacing a separator by a string of ASCII bytes that starts and ends with a separator
// other than the apostrophe (as an HTML character reference such as &amp; or &#39; does), never lowers
// the bound: no run is cut or joined, a run that followed an apostrophe may now count, and the string
// adds runs of its own. Nor does replacing non-ASCII bytes by non-ASCII bytes (invalid UTF-8 by U+FFFD).
// So the bound of a text bounds the count of the text escaped for markup, and indented.
func (e *Encoding) LowerBound(parts []Part, limit int) int {
	if limit < 0 {
		limit = math.MaxInt
	} else {
		size := 0
		for _, p := range parts {
			size += len(p.Text)
		}
		if (size+1)/2 <= limit {
			return 0
		}
	}
	var r runScan
	for _, p := range parts {
		if r.scan(p.Text, limit) {
			return r.runs
		}
	}
	return r.end()
}

// runScan is the state of a scan for letter runs across the parts of one text.
type runScan struct {
	runs     int
	inRun    bool // the last byte is a word byte
	letter   bool // the current run holds an ASCII letter
	apostrof bool // the current run follows an apostrophe
	prev     byte // the last byte
}

// byteKind: 0 separates runs, 1 is an ASCII letter, 2 is part of a non-ASCII character.
var byteKind = func() (t [256]byte) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = 1, 1
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = 2
	}
	return t
}()

// scan goes on with s, and reports whether more than limit runs have been counted (it then stops).
func (r *runScan) scan(s string, limit int) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch byteKind[c] {
		case 0:
			if r.inRun && r.letter && !r.apostrof {
				if r.runs++; r.runs > limit {
					return true
				}
			}
			r.inRun = false
		case 1:
			if !r.inRun {
				r.inRun, r.letter, r.apostrof = true, false, r.prev == '\''
			}
			r.letter = true
		default:
			if !r.inRun {
				r.inRun, r.letter, r.apostrof = true, false, r.prev == '\''
			}
		}
		r.prev = c
	}
	return r.runs > limit
}

// end counts the run the text ends in, and returns the count.
func (r *runScan) end() int {
	if r.inRun && r.letter && !r.apostrof {
		r.runs++
	}
	r.inRun = false
	return r.runs
}
