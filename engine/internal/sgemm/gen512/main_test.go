package main

import (
	"bytes"
	"os"
	"testing"
)

// TestCommittedUpToDate fails when kernel512_amd64.s is not what the
// generator writes: edit the generator and run go generate, never the file.
func TestCommittedUpToDate(t *testing.T) {
	have, err := os.ReadFile("../kernel512_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, generate()) {
		t.Fatal("kernel512_amd64.s differs from gen512's output: run go generate ./engine/internal/sgemm")
	}
}
