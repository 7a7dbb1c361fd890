package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// complete answers each place of a command line: commands, subcommands,
// flags, the values of flags it knows, arguments, and the shell's own
// file or directory completion where a path goes.
func TestCompleteCandidates(t *testing.T) {
	var presetNames, sinePresets []string
	for _, p := range presets.All() {
		presetNames = append(presetNames, p.Name)
		if strings.HasPrefix(p.Name, "sine") {
			sinePresets = append(sinePresets, p.Name)
		}
	}
	cases := []struct {
		line      []string // the words after mkbench, the last being typed
		want      []string // exactly these, in this order (nil: none)
		directive string
	}{
		{[]string{""}, topCommands(), directiveWords},
		{[]string{"sw"}, []string{"sweep"}, directiveWords},
		{[]string{"--v"}, []string{"--version"}, directiveWords},
		{[]string{"sweep", ""}, []string{"plan", "run", "status", "resume", "cancel", "work"}, directiveWords},
		{[]string{"models", "e"}, []string{"export"}, directiveWords},
		{[]string{"data", ""}, []string{"get"}, directiveWords},
		{[]string{"run", "--pre"}, []string{"--preset"}, directiveWords},
		{[]string{"run", "--re"}, []string{"--resume", "--repair"}, directiveWords},
		{[]string{"run", "--preset", ""}, presetNames, directiveWords},
		{[]string{"run", "--preset", "sine"}, sinePresets, directiveWords},
		{[]string{"run", "--preset=sine-5"}, []string{"--preset=sine-5shot"}, directiveWords},
		{[]string{"run", "--preset", "sine-5shot", "--variant", "vrf"}, []string{"vrf", "vrf+ctx", "vrf+cnf"}, directiveWords},
		{[]string{"run", "--set", "lr_s"}, []string{"lr_schedule=", "lr_step="}, directiveNoSpace},
		{[]string{"run", "--set", "lr="}, nil, directiveWords},
		{[]string{"run", "--set=clip"}, []string{"--set=clip_norm="}, directiveNoSpace},
		{[]string{"run", "--backbone", "conv"}, []string{"conv4", "conv5"}, directiveWords},
		{[]string{"run", "--iters", ""}, nil, directiveWords},
		{[]string{"run", "--out", ""}, nil, directiveDirs},
		{[]string{"run", "--quiet", "--se"}, []string{"--seed", "--set"}, directiveWords},
		{[]string{"experiment", ""}, []string{"ablation", "versatility", "efficiency", "shots"}, directiveWords},
		{[]string{"experiment", "ablation", "--variants", "rff,m"}, []string{"rff,metakernel"}, directiveWords},
		{[]string{"experiment", "ablation", "--engine", ""}, []string{"local", "slurm"}, directiveWords},
		{[]string{"experiment", "ablation", "--slurm", ""}, nil, directiveFiles},
		{[]string{"help", ""}, append(topCommands(), "settings", "environment"), directiveWords},
		{[]string{"help", "se"}, []string{"settings"}, directiveWords},
		{[]string{"help", "sweep", "r"}, []string{"run", "resume"}, directiveWords},
		{[]string{"data", "get", ""}, []string{"omniglot", "cifarfs"}, directiveWords},
		{[]string{"data", "get", "omniglot", "--dir", ""}, nil, directiveDirs},
		{[]string{"data", "get", "omniglot", "--from", ""}, nil, directiveFiles},
		{[]string{"sweep", "plan", ""}, nil, directiveFiles},
		{[]string{"sweep", "status", ""}, nil, directiveDirs},
		{[]string{"sweep", "run", "grid.yaml", "--jobs", "2", "--d"}, []string{"--dry-run", "--data", "--device"}, directiveWords},
		{[]string{"run", "--device", ""}, []string{"cpu", "opencl", "auto", "opencl:0"}, directiveWords},
		{[]string{"eval", "--device=a"}, []string{"--device=auto"}, directiveWords},
		{[]string{"sweep", "resume", "runs/grid", "--device", "c"}, []string{"cpu"}, directiveWords},
		{[]string{"report", ""}, nil, directiveDirs},
		{[]string{"runs", "--sort", "-s"}, []string{"-seed", "-state"}, directiveWords},
		{[]string{"export", "runs/grid", "--format", ""}, []string{"csv", "json"}, directiveWords},
		{[]string{"export", "runs/grid", "--out", ""}, nil, directiveFiles},
		{[]string{"eval", "--model", "omniglot-5w"}, []string{"omniglot-5w1s", "omniglot-5w5s"}, directiveWords},
		{[]string{"eval", "--split", ""}, []string{"all", "test"}, directiveWords},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}, directiveWords},
		{[]string{"nonsense", ""}, nil, directiveFiles},
	}
	for _, c := range cases {
		got := complete(c.line)
		if !slices.Equal(got.words, c.want) || got.directive != c.directive {
			t.Errorf("complete(%q) = %q %s, want %q %s", c.line, got.words, got.directive, c.want, c.directive)
		}
	}
	if got := complete([]string{"--"}); slices.Contains(got.words, completeCommand.name) || slices.Contains(complete([]string{"_"}).words, completeCommand.name) {
		t.Errorf("the hidden %s is offered", completeCommand.name)
	}
	// Every variant and --set key is offered where it goes.
	if got := complete([]string{"run", "--variant", ""}); !slices.Equal(got.words, engine.Variants) {
		t.Errorf("--variant offers %q, want %q", got.words, engine.Variants)
	}
	if got := complete([]string{"tui", "--set", ""}); len(got.words) != len(presets.OverrideKeys()) {
		t.Errorf("--set offers %d keys, want the %d of presets.OverrideKeys", len(got.words), len(presets.OverrideKeys()))
	}
}

// The flags completion offers for each command are those its help page
// lists, in the same order: both come from where the command defines them.
func TestCompletionFlagsAreTheHelpPages(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  (--[a-z0-9-]+)`)
	for _, c := range commands {
		if c.hidden {
			continue
		}
		page, _, code := mkbench(t, append([]string{"help"}, strings.Fields(c.name)...)...)
		if code != 0 {
			t.Fatalf("mkbench help %s: exit %d", c.name, code)
		}
		var want []string
		if i := strings.Index(page, "\nFlags:\n"); i >= 0 {
			for _, m := range flagLine.FindAllStringSubmatch(page[i:], -1) {
				want = append(want, m[1])
			}
		}
		want = append(want, "--help")
		got := complete(append(strings.Fields(c.name), "--"))
		if !slices.Equal(got.words, want) {
			t.Errorf("mkbench %s --<tab> offers %q; its help page lists %q", c.name, got.words, want)
		}
	}
}

// mkbench completion prints each shell's script, and refuses another
// shell in one line.
func TestCompletionCommand(t *testing.T) {
	for _, sh := range shells {
		out, se, code := mkbench(t, "completion", sh)
		if code != 0 || se != "" || !strings.Contains(out, "mkbench __complete") {
			t.Errorf("mkbench completion %s: exit %d, stderr %q, script %q", sh, code, se, out)
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "bsah"}} {
		_, se, code := mkbench(t, args...)
		if code != 1 || strings.Count(se, "\n") != 1 {
			t.Errorf("mkbench %q: exit %d, stderr %q; want one line and exit 1", args, code, se)
		}
	}
	if _, se, _ := mkbench(t, "completion", "bsah"); !strings.Contains(se, "did you mean bash?") {
		t.Errorf("a mistyped shell gets %q, no did you mean", se)
	}
	// __complete answers on stdout, one candidate a line and the directive last.
	out, se, code := mkbench(t, "__complete", "run", "--preset", "sine-5")
	if code != 0 || se != "" || out != "sine-5shot\n:words\n" {
		t.Errorf("mkbench __complete run --preset sine-5: exit %d, stderr %q, stdout %q", code, se, out)
	}
	if list, _, _ := mkbench(t, "help"); strings.Contains(list, completeCommand.name) {
		t.Errorf("mkbench help lists the hidden %s", completeCommand.name)
	}
}

// Each script parses in its shell (each shell skips, saying so, where it
// is not installed).
func TestCompletionScriptsParse(t *testing.T) {
	for _, sh := range shells {
		path, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s is not installed: its script is not checked", sh)
			continue
		}
		file := filepath.Join(t.TempDir(), "mkbench."+sh)
		if err := os.WriteFile(file, []byte(completionScripts[sh]), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, "-n", file).CombinedOutput(); err != nil {
			t.Errorf("%s -n on mkbench completion %s: %v\n%s", sh, sh, err, out)
		}
	}
}

// In bash, the script completes as the Go function says, with the words
// bash hands a completion function: --preset=VALUE split at "=", a path
// completed from the directory, --set KEY= with no space after it.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed: the bash completion is not run")
	}
	work := t.TempDir()
	for _, name := range []string{"grid.yaml", "great.yaml"} {
		if err := os.WriteFile(filepath.Join(work, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(work, "runs"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		words string // COMP_WORDS, as bash splits the line (the cursor on the last)
		want  string // COMPREPLY, one a line
	}{
		{"mkbench sw", "sweep"},
		{"mkbench sweep r", "resume\nrun"},
		{"mkbench run --pre", "--preset"},
		{"mkbench run --preset sine-5", "sine-5shot"},
		{"mkbench run --preset = sine-5", "sine-5shot"}, // --preset=sine-5
		{"mkbench run --preset = ''", strings.Join(presetNamesFor(""), "\n")},
		{"mkbench run --set clip", "clip_norm=\nnospace"},
		{"mkbench run --set lr = ''", ""}, // --set lr=: a value, free
		{"mkbench sweep plan gr", "great.yaml\ngrid.yaml"},
		{"mkbench report r", "runs"},
		{"mkbench help models e", "export"},
	}
	for _, c := range cases {
		script := `source <(mkbench completion bash) || exit 9
compopt() { [[ $2 == nospace ]] && nospace=1; return 0; }  # only a live completion has options
COMP_WORDS=(` + c.words + `); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); nospace=
_mkbench
printf '%s\n' "${COMPREPLY[@]}" | sort
[[ -n $nospace ]] && echo nospace
exit 0`
		if got := inShell(t, work, bash, "--norc", "--noprofile", "-c", script); got != c.want {
			t.Errorf("bash completing %q: COMPREPLY %q, want %q", c.words, got, c.want)
		}
	}
}

// presetNamesFor are the presets that start with prefix, sorted as the
// shell's sort prints them.
func presetNamesFor(prefix string) []string {
	var out []string
	for _, p := range presets.All() {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p.Name)
		}
	}
	cmd := exec.Command("sort")
	cmd.Stdin = strings.NewReader(strings.Join(out, "\n") + "\n")
	if b, err := cmd.Output(); err == nil {
		return strings.Fields(string(b))
	}
	return out
}

// In fish, the script completes as the Go function says: fish's own
// complete -C runs it on a command line.
func TestFishCompletion(t *testing.T) {
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Skip("fish is not installed: the fish completion is not run")
	}
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "grid.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ line, want string }{
		{"mkbench sw", "sweep"},
		{"mkbench run --preset sine-5", "sine-5shot"},
		{"mkbench run --preset=sine-5", "--preset=sine-5shot"},
		{"mkbench run --set clip", "clip_norm="},
		{"mkbench sweep plan gr", "grid.yaml"},
	}
	for _, c := range cases {
		if got := inShell(t, work, fish, "--no-config", "-c", `mkbench completion fish | source; complete -C $argv[1]`, c.line); got != c.want {
			t.Errorf("fish completing %q: %q, want %q", c.line, got, c.want)
		}
	}
}

// In zsh, the script hands words[2,CURRENT] to mkbench and acts on the
// directive: compadd the candidates (-S ” after --set KEY=), _files for
// a path. compadd and _files work only inside a completion widget, so
// they are stood in for by functions that print what they were given.
func TestZshCompletion(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh is not installed: the zsh completion is not run")
	}
	cases := []struct{ words, want string }{
		{"mkbench sw", "sweep"},
		{"mkbench run --preset sine-5", "sine-5shot"},
		{"mkbench run --set clip", "-S '' clip_norm="},
		{"mkbench report ''", "_files -/"},
		{"mkbench sweep plan ''", "_files"},
	}
	for _, c := range cases {
		script := `compadd() { local i=${@[(i)--]}; print -r -- ${(q)@[1,i-1]} ${@[i+1,-1]}; }
_files() { print -r -- _files $@; }
compdef() { }
compset() { }
source <(mkbench completion zsh) || exit 9
words=(` + c.words + `); CURRENT=${#words}
_mkbench`
		if got := inShell(t, t.TempDir(), zsh, "-f", "-c", script); got != c.want {
			t.Errorf("zsh completing %q: %q, want %q", c.words, got, c.want)
		}
	}
}

// inShell runs shell with args in dir, the mkbench the tests built first
// on its PATH, and returns its output, trimmed.
func inShell(t *testing.T, dir, shell string, args ...string) string {
	t.Helper()
	cmd := exec.Command(shell, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", shell, args, err, out)
	}
	return strings.TrimSpace(string(out))
}
