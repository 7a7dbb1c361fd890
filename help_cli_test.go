package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// Every command of the table has a help page, the same from mkbench help
// CMD, mkbench CMD --help and -h, on stdout with exit 0: its synopsis,
// its flags written --name in the order the command defines them, each
// with a default that says what it is, and examples.
func TestHelpPages(t *testing.T) {
	singleDash := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	for _, c := range commands {
		if c.hidden {
			continue
		}
		args := strings.Fields(c.name)
		page, se, code := mkbench(t, append([]string{"help"}, args...)...)
		if code != 0 || se != "" || !strings.HasPrefix(page, "mkbench "+c.name+": "+c.synopsis+"\n") {
			t.Errorf("mkbench help %s: exit %d, stderr %q, page %q", c.name, code, se, page)
			continue
		}
		for _, h := range []string{"--help", "-h"} {
			if so, se, code := mkbench(t, append(args, h)...); code != 0 || se != "" || so != page {
				t.Errorf("mkbench %s %s: exit %d, stderr %q, and a page unlike mkbench help %s's:\n%s", c.name, h, code, se, c.name, so)
			}
		}
		for _, bad := range []string{"(default -1)", "(default 0)", "Usage of", "flag provided"} {
			if strings.Contains(page, bad) {
				t.Errorf("mkbench help %s says %q:\n%s", c.name, bad, page)
			}
		}
		if singleDash.MatchString(page) {
			t.Errorf("mkbench help %s lists a single-dash flag:\n%s", c.name, page)
		}
		if len(c.examples) == 0 || !strings.Contains(page, "Examples:\n  mkbench ") || len(c.usage) == 0 || c.long == "" {
			t.Errorf("mkbench %s lacks examples, usage or long help", c.name)
		}
	}
	page, _, _ := mkbench(t, "help", "run")
	flags := regexp.MustCompile(`(?m)^  --([a-z-]+)`).FindAllStringSubmatch(page, -1)
	if len(flags) < 20 || flags[0][1] != "preset" || flags[1][1] != "variant" || flags[2][1] != "iters" {
		t.Errorf("run's flags, in the order they matter, begin %v", flags[:min(3, len(flags))])
	}
	// A long help's paragraphs are wrapped each on its own, a blank line between.
	for _, want := range []string{"--seed S\n      random seed (--set seed; default: the preset's)\n", "With --resume DIR the run keeps its own settings",
		"\n\n--resume DIR continues an interrupted run", "\n\nCtrl-C, SIGTERM and SIGHUP"} {
		if !strings.Contains(page, want) {
			t.Errorf("mkbench help run lacks %q:\n%s", want, page)
		}
	}
	if page, _, _ := mkbench(t, "help", "export"); !strings.Contains(page, "  --out FILE\n") {
		t.Errorf("export's --out is not shown as a FILE:\n%s", page)
	}
	// The hidden alias works and is not advertised.
	if page, _, _ := mkbench(t, "help", "models"); strings.Contains(page, "--dir") || !strings.Contains(page, "--models-dir DIR") {
		t.Errorf("mkbench help models:\n%s", page)
	}
	list, _, code := mkbench(t, "help")
	for _, c := range topCommands() {
		if code != 0 || !strings.Contains(list, "  "+c+" ") {
			t.Errorf("mkbench help does not list %s:\n%s", c, list)
		}
	}
	if so, _, code := mkbench(t, "--version"); code != 0 || so != "mkbench "+version+"\n" {
		t.Errorf("--version: %d %q", code, so)
	}
}

// mkbench help settings names every --set key with its kind, its help and
// its default in the presets.
func TestHelpSettings(t *testing.T) {
	so, se, code := mkbench(t, "help", "settings")
	if code != 0 || se != "" {
		t.Fatalf("exit %d, %q", code, se)
	}
	for _, k := range presets.OverrideKeys() {
		i := strings.Index(so, "\n  "+k.Key+" (")
		if i < 0 {
			t.Errorf("help settings lacks %s", k.Key)
			continue
		}
		entry := so[i:]
		if j := strings.Index(entry[1:], "\n\n"); j > 0 {
			entry = entry[:j+1]
		}
		words := strings.Fields(k.Help)
		if !strings.Contains(strings.Join(strings.Fields(entry), " "), strings.Join(words, " ")) || !strings.Contains(entry, "default: ") {
			t.Errorf("help settings' %s lacks its help or default:\n%s", k.Key, entry)
		}
	}
	// Defaults are the presets' own values.
	if d := settingDefault("lr_schedule"); d == "" || strings.Contains(d, "<nil>") {
		t.Errorf("lr_schedule's default %q", d)
	}
	if d := settingDefault("backbone"); !strings.Contains(d, "conv5") || !strings.Contains(d, "resnet18") {
		t.Errorf("backbone's default %q", d)
	}
	if d := settingDefault("way"); strings.Contains(d, "sine") {
		t.Errorf("way's default names sine presets, which refuse it: %q", d)
	}
}

// mkbench help environment names every variable mkbench's code reads.
func TestHelpEnvironment(t *testing.T) {
	so, _, code := mkbench(t, "help", "environment")
	if code != 0 {
		t.Fatal(code)
	}
	getenv := regexp.MustCompile(`os\.(?:Getenv|LookupEnv)\("([A-Z_]+)"\)`)
	seen := 0
	filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, m := range getenv.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !strings.Contains(so, m[1]) {
				t.Errorf("%s reads $%s, which mkbench help environment does not name", p, m[1])
			}
		}
		return nil
	})
	for _, v := range []string{"MKBENCH_RUNS", "MKBENCH_DATA", "MKBENCH_CACHE", "CI", "NO_COLOR", "MKBENCH_SWEEP_PARENT"} {
		if !strings.Contains(so, "\n  "+v) && !strings.Contains(so, ", "+v) {
			t.Errorf("help environment lacks %s", v)
		}
	}
	if seen < 5 {
		t.Errorf("found only %d os.Getenv calls: the scan is broken", seen)
	}
}

// docs/cli.md and docs/settings.md are the help pages as mkbench prints
// them; go generate writes them again.
func TestDocsAreCurrent(t *testing.T) {
	for _, doc := range []string{"cli", "settings"} {
		want, _, code := mkbench(t, "help", "--markdown", doc)
		if code != 0 || !strings.HasPrefix(want, "# ") {
			t.Fatalf("help --markdown %s: exit %d", doc, code)
		}
		got, err := os.ReadFile(filepath.Join("docs", doc+".md"))
		if err != nil || string(got) != want {
			t.Errorf("docs/%s.md is not what mkbench help --markdown %s writes (%v): run go generate in the repository's root", doc, doc, err)
		}
	}
}

func TestSuggest(t *testing.T) {
	for _, tc := range []struct {
		typed string
		names []string
		want  string
	}{
		{"prest", []string{"out", "preset", "variant"}, "preset"},
		{"rnu", topCommands(), "run"},
		{"exprt", topCommands(), "export"},
		{"xyzzy", topCommands(), ""},
		{"a", []string{"b", "run"}, "b"},
		{"lrr", settingKeys(), "lr"},
		{"metakernal", engine.Variants, "metakernel"},
		{"", []string{"run"}, ""},
	} {
		if got := suggest(tc.typed, tc.names); got != tc.want {
			t.Errorf("suggest(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d", d)
	}
}

// The progress line's ETA ends with --minutes when the budget ends first,
// and a long run's first line is followed by how long and what makes it
// shorter.
func TestProgressETAAndLongRunNote(t *testing.T) {
	s := engine.Snapshot{Iter: 100, Iters: 1_000_000, ItersPerSec: 10, Wall: 10 * time.Second}
	if eta := trainETA(s, time.Minute); eta != 50*time.Second {
		t.Errorf("ETA within a 1-minute budget: %v, want 50s", eta)
	}
	if eta := trainETA(s, 0); eta < 24*time.Hour {
		t.Errorf("ETA without a budget: %v", eta)
	}
	p, err := presets.Get("folder-5w1s")
	if err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { longNoteAfter = d }(longNoteAfter)
	longNoteAfter = 0
	var b strings.Builder
	obs := progressPrinter(&b, 0, p.Config)
	obs.Observe(s)
	obs.Observe(s) // within two seconds: no line
	out := b.String()
	for _, want := range []string{"eta 27h46m30s", "note: this run will train for about 27h46m30s more", "--image-size 32 (now 84)", "--set backbone=conv4 (now conv5)", "--minutes M"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress of a long folder-5w1s run lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != 2 {
		t.Errorf("want one progress line and one note:\n%s", out)
	}
	// The first seconds' speed is not trusted for it.
	longNoteAfter = time.Hour
	b.Reset()
	progressPrinter(&b, 0, p.Config).Observe(s)
	if strings.Contains(b.String(), "note:") {
		t.Errorf("a note before longNoteAfter: %q", b.String())
	}
	b.Reset()
	progressPrinter(&b, time.Minute, p.Config).Observe(s)
	if strings.Contains(b.String(), "note:") || !strings.Contains(b.String(), "eta 50s") {
		t.Errorf("a 1-minute run: %q", b.String())
	}
}

// A long default evaluation's first progress line is followed by what
// makes it shorter; one whose size was chosen gets no advice.
func TestLongEvalNote(t *testing.T) {
	defer func(d, n time.Duration) { evalProgressEvery, longNoteAfter = d, n }(evalProgressEvery, longNoteAfter)
	evalProgressEvery, longNoteAfter = 0, 0
	var b strings.Builder
	p := evalProgress(&b, evalShorter(30000))
	time.Sleep(20 * time.Millisecond)
	p(1, 30000) // 20 ms a task: ten minutes more
	p(2, 30000)
	if !strings.Contains(b.String(), "note: this evaluation will take about") || !strings.Contains(b.String(), "--eval-tasks 3000 ") ||
		strings.Count(b.String(), "note:") != 1 {
		t.Errorf("long evaluation: %q", b.String())
	}
	b.Reset()
	p = evalProgress(&b, "")
	time.Sleep(20 * time.Millisecond)
	p(1, 30000)
	if strings.Contains(b.String(), "note:") {
		t.Errorf("an evaluation of a chosen size: %q", b.String())
	}
}

// mkbench models has the settings column: the settings each model departs
// from its preset in.
func TestModelsSettingsColumn(t *testing.T) {
	so, se, code := mkbench(t, "models")
	if code != 0 || !strings.Contains(strings.SplitN(so, "\n", 2)[0], "SETTINGS") {
		t.Fatalf("mkbench models: exit %d, %q\n%s", code, se, so)
	}
	list, err := models.Shipped().List()
	if err != nil || len(list) == 0 {
		t.Fatalf("shipped models: %v", err)
	}
	for _, m := range list {
		want := "the preset's"
		if len(m.Settings) > 0 {
			want = strings.Join(m.Settings, " ")
		}
		found := false
		for _, line := range strings.Split(so, "\n") {
			found = found || strings.HasPrefix(line, m.Name+" ") && strings.HasSuffix(line, want)
		}
		if !found {
			t.Errorf("mkbench models: %s's row does not end with its settings %q:\n%s", m.Name, want, so)
		}
	}
}
