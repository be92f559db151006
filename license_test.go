package loom_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// apacheLicenseSHA256 is the SHA-256 of the Apache License 2.0 as the Apache Software Foundation publishes
// it (LICENSE-2.0.txt), the text that Go modules under that license ship as their LICENSE.
const apacheLicenseSHA256 = "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4"

// TestLicense_IsApache2: LICENSE is a copyright line for The Loom Authors, then the Apache License 2.0
// verbatim; the root package says so in an SPDX line.
func TestLicense_IsApache2(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	head, text, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok || string(head) != "Copyright The Loom Authors." {
		t.Errorf("LICENSE starts %q, want the line \"Copyright The Loom Authors.\" and a blank line", head)
	}
	if sum := sha256.Sum256(text); hex.EncodeToString(sum[:]) != apacheLicenseSHA256 {
		t.Errorf("LICENSE after its copyright line is not the Apache License 2.0 verbatim (SHA-256 %x)", sum)
	}
	src, err := os.ReadFile("loom.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), "// SPDX-License-Identifier: Apache-2.0\n") {
		t.Error("loom.go does not start with the SPDX line")
	}
}
