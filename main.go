// Command mkbench is a terminal workbench for MetaKernel few-shot learning.
// Without arguments it opens the workbench (package ui) when it has a
// terminal, and otherwise points at `mkbench run`; `mkbench help` lists the
// headless commands that scripts and CI use.
package main

import (
	"fmt"
	"os"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// fail prints one clear error line and returns the exit code for it.
func fail(stderr *os.File, err error) int {
	fmt.Fprintf(stderr, "mkbench: %v\n", err)
	return 1
}
