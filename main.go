// Command mkbench is a terminal workbench for MetaKernel few-shot learning.
// Without arguments it opens the workbench (package ui) when it has a
// terminal, and otherwise points at `mkbench run`; `mkbench help` lists the
// headless commands that scripts and CI use.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/mkbench/mkbench/internal/runfile"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// fail prints one clear error line and returns the exit code for it.
func fail(stderr io.Writer, err error) int {
	say(stderr, "%v", err)
	return 1
}

// say prints a line for the user on stderr, "mkbench: " first. Messages
// quote names read from files and folders (a run's directory, a model's
// name, an image's path), so they pass through runfile.PrintableLines:
// such a name cannot write escape sequences to the terminal.
func say(stderr io.Writer, format string, a ...any) {
	fmt.Fprintf(stderr, "mkbench: %s\n", runfile.PrintableLines(fmt.Sprintf(format, a...)))
}
