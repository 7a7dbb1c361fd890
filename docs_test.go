package main

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// The package map in docs/development.md is true: every package of the
// module has a row, every row a package, and each package imports only
// packages of its own row or below it — and none of the core a UI one.
func TestPackageMapIsTrue(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to list the packages")
	}
	doc, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	// Each row's first cell: the package, then siblings (`dgemm`) or
	// its files (`cli.go`, `sweep_*.go`).
	var rows [][]string
	tick := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var pkgs []string
		for i, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			name := strings.TrimSuffix(m[1], "/")
			switch {
			case strings.HasSuffix(name, ".go"):
				continue
			case name == "main":
				name = "."
			case i > 0 && !strings.Contains(name, "/"):
				name = path.Join(path.Dir(pkgs[0]), name)
			}
			pkgs = append(pkgs, name)
		}
		rows = append(rows, pkgs)
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/mkbench/mkbench"
	rel := func(p string) string {
		if p == mod {
			return "."
		}
		return strings.TrimPrefix(p, mod+"/")
	}
	// A package's row: the row naming it or, for a helper inside one
	// (dgemm/gen, gemmcore/gemmtest), the nearest enclosing one.
	rowOf := func(p string) int {
		best, bestLen := -1, -1
		for i, r := range rows {
			for _, q := range r {
				if (p == q || q != "." && strings.HasPrefix(p, q+"/")) && len(q) > bestLen {
					best, bestLen = i, len(q)
				}
			}
		}
		return best
	}
	seen := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		p := rel(f[0])
		r := rowOf(p)
		if r < 0 {
			t.Errorf("package %s has no row in the package map", p)
			continue
		}
		seen[r] = true
		core := !strings.HasPrefix(p, "ui") && p != "."
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			q := rel(imp)
			if rq := rowOf(q); rq < r {
				t.Errorf("%s imports %s, which the package map lists above it", p, q)
			}
			if core && strings.HasPrefix(q, "ui") {
				t.Errorf("%s, a core package, imports the UI package %s", p, q)
			}
		}
	}
	for i, r := range rows {
		if !seen[i] {
			t.Errorf("the package map lists %v, which is no package", r)
		}
	}
}
