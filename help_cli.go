package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

//go:generate sh -c "go run . help --markdown cli > docs/cli.md && go run . help --markdown settings > docs/settings.md"

// helpWidth is the column help text is wrapped at.
const helpWidth = 80

// writeHelp writes the help page of the command whose flags fs holds: its
// synopsis, forms, long help, flags (--double-dash, in the order the
// command defines them, each with its help and default), which flags
// --resume takes, and examples.
func writeHelp(w io.Writer, fs *flagSet) {
	if fc, ok := w.(*flagCapture); ok { // completion asking for the flags
		fc.fs = fs
		return
	}
	c := lookupCommand(fs.Name())
	if c == nil { // every command has a row; a missing one still gets its flags
		c = &command{name: fs.Name()}
	}
	fmt.Fprintf(w, "mkbench %s: %s\n\nUsage:\n", c.name, c.synopsis)
	for _, u := range c.usage {
		fmt.Fprintf(w, "  mkbench %s\n", u)
	}
	for _, para := range paragraphs(c.long) {
		fmt.Fprintf(w, "\n%s\n", wrap(para, "", helpWidth))
	}
	if subs := subcommands(c.name); len(subs) > 0 {
		fmt.Fprintln(w, "\nCommands:")
		for _, s := range subs {
			fmt.Fprintf(w, "  %-14s %s\n", s, lookupCommand(c.name+" "+s).synopsis)
		}
	}
	if len(fs.order) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		for _, n := range fs.order {
			f := fs.Lookup(n)
			fmt.Fprintf(w, "  --%s%s\n%s\n", n, metavar(fs.Name(), f), wrap(flagText(f), "      ", helpWidth))
		}
	}
	if c.resumes != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(fmt.Sprintf("With --resume DIR the %s keeps its own settings: only %s can be given.", c.resumes, flagList(c.resumeTakes)), "", helpWidth))
	}
	if len(c.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// metavars name the value of flags whose type says too little.
var metavars = map[string]string{
	"preset": "NAME", "model": "NAME", "name": "NAME", "variant": "V", "variants": "V,..", "seeds": "S,..", "seed": "S",
	"out": "DIR", "data": "DIR", "resume": "DIR", "run": "DIR", "folder": "DIR", "models-dir": "DIR", "sweep": "DIR",
	"set": "KEY=VALUE", "minutes": "M", "engine": "local|slurm", "format": "csv|json", "split": "all|test",
	"sources": "a,b", "test-sources": "a,b", "bases": "D", "ways": "N,..", "shots": "K,..", "slurm": "FILE",
	"sort": "KEY", "runs": "[DIR]", "filter": "TEXT", "dir": "DIR", "from": "URL|DIR|FILE", "backbone": "NAME", "channels": "1|3", "support-shift": "R", "index": "I", "jobs": "K",
	"device": "cpu|opencl[:N]|auto",
}

// commandMetavars name the value of a flag whose meaning is the
// command's own: export's --out is a file, every other --out a directory.
var commandMetavars = map[string]string{"export out": "FILE"}

// metavar is " NAME" after a flag of command cmd in its help: what its
// value is. Completion reads it too (DIR: directories, FILE: files, a|b:
// those words).
func metavar(cmd string, f *flag.Flag) string {
	if m, ok := commandMetavars[cmd+" "+f.Name]; ok {
		return " " + m
	}
	if m, ok := metavars[f.Name]; ok {
		if f.Name == "bases" && f.DefValue == "" {
			return " D,.." // experiment's list
		}
		return " " + m
	}
	switch kind, _ := flag.UnquoteUsage(f); kind {
	case "":
		return "" // a bool
	case "int", "uint":
		return " N"
	case "float":
		return " X"
	default:
		return " VALUE"
	}
}

// flagText is a flag's help with its default: the help's own words where
// it names one ("default: the preset's"), else the value the flag starts
// with, unless that is a zero or a negative number that means "not given"
// (--index -1: the help says it is required).
func flagText(f *flag.Flag) string {
	text := f.Usage
	if strings.Contains(text, "default") || strings.HasPrefix(f.DefValue, "-") {
		return text
	}
	switch f.DefValue {
	case "", "0", "false", "[]":
		return text
	}
	return fmt.Sprintf("%s (default %s)", text, f.DefValue)
}

// paragraphs splits a command's long help at its blank lines ("\n\n"),
// each paragraph to be wrapped on its own.
func paragraphs(text string) []string {
	var out []string
	for _, p := range strings.Split(text, "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// wrap fills text to width, each line starting with indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if len([]rune(line)) > len(indent) && len([]rune(line))+1+len([]rune(word)) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
}

// cmdHelp prints mkbench's command list, a command's page, the settings or
// the environment, or (--markdown) the pages docs/ is made of.
func cmdHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeCommandList(stdout)
		return 0
	}
	switch args[0] {
	case "-h", "--help":
		writeHelp(stdout, newFlags("help"))
		return 0
	case "settings":
		writeSettings(stdout, false)
		return 0
	case "environment", "env":
		writeEnvironment(stdout, false)
		return 0
	case "--markdown":
		if len(args) == 2 && args[1] == "cli" {
			return writeMarkdownCLI(stdout, stderr)
		}
		if len(args) == 2 && args[1] == "settings" {
			fmt.Fprint(stdout, "# Settings\n\n<!-- Generated by `mkbench help --markdown settings` (go generate); edit help_cli.go or presets/spec.go, not this file. -->\n\n")
			writeSettings(stdout, true)
			fmt.Fprint(stdout, "\n# Environment\n\n")
			writeEnvironment(stdout, true)
			return 0
		}
		return fail(stderr, errors.New("help: --markdown takes cli or settings (mkbench help help)"))
	}
	name := strings.Join(args, " ")
	c := lookupCommand(name)
	if c == nil {
		topics := append(topCommands(), "settings", "environment")
		for _, t := range topCommands() {
			for _, s := range subcommands(t) {
				topics = append(topics, t+" "+s)
			}
		}
		return unknownName(stderr, "help topic", name, topics, "help")
	}
	return c.run([]string{"--help"}, stdout, stderr)
}

// writeCommandList is mkbench help: each command with its synopsis.
func writeCommandList(w io.Writer) {
	fmt.Fprintln(w, "mkbench: a workbench for MetaKernel few-shot learning")
	fmt.Fprintln(w, "\nUsage:\n  mkbench                open the workbench (terminal UI)\n  mkbench COMMAND [flags]\n\nCommands:")
	for _, c := range commands {
		if !strings.Contains(c.name, " ") && !c.hidden {
			fmt.Fprintf(w, "  %-12s %s\n", c.name, c.synopsis)
		}
	}
	fmt.Fprintln(w, "\nmkbench help COMMAND (or mkbench COMMAND --help) describes a command and its flags;")
	fmt.Fprintln(w, "mkbench help settings lists every --set key; mkbench help environment the variables mkbench reads.")
}

// cmdVersion prints the version.
func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version")
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	fmt.Fprintf(stdout, "mkbench %s\n", version)
	return 0
}

// cmdPresets lists the presets.
func cmdPresets(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("presets")
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	for _, p := range presets.All() {
		fmt.Fprintf(stdout, "%-14s %s\n", p.Name, p.Summary())
	}
	return 0
}

// unknownName refuses a mistyped name with the nearest known one and the
// help page that lists them.
func unknownName(stderr io.Writer, what, typed string, known []string, page string) int {
	return fail(stderr, unknownError(what, typed, known, strings.TrimSpace("mkbench help "+page)))
}

// writeMarkdownCLI writes docs/cli.md: the command list, then each
// command's help page as mkbench prints it.
func writeMarkdownCLI(stdout, stderr io.Writer) int {
	var b bytes.Buffer
	b.WriteString("# Command line\n\n<!-- Generated by `mkbench help --markdown cli` (go generate); edit the command table (commands_cli.go) or a command's flags, not this file. -->\n\n")
	b.WriteString("| command | what it does |\n|---|---|\n")
	var listed []command
	for _, c := range commands {
		if !c.hidden {
			listed = append(listed, c)
		}
	}
	for _, c := range listed {
		fmt.Fprintf(&b, "| [`mkbench %s`](#mkbench-%s) | %s |\n", c.name, strings.ReplaceAll(c.name, " ", "-"), strings.ReplaceAll(c.synopsis, "|", `\|`))
	}
	b.WriteString("\nEvery `--set` key is in [settings.md](settings.md), with the environment variables mkbench reads.\n")
	for _, c := range listed {
		page, err := helpPage(c)
		if err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(&b, "\n## mkbench %s\n\n```\n%s```\n", c.name, page)
	}
	stdout.Write(b.Bytes())
	return 0
}

// helpPage is c's help page, as mkbench help NAME prints it.
func helpPage(c command) (string, error) {
	f, err := os.CreateTemp("", "mkbench-help")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if code := c.run([]string{"--help"}, f, f); code != 0 {
		return "", fmt.Errorf("help: mkbench %s --help exited %d", c.name, code)
	}
	b, err := os.ReadFile(f.Name())
	return string(b), err
}

// kindNames say what each kind of setting takes.
var kindNames = map[presets.Kind]string{
	presets.KindInt: "whole number", presets.KindFloat: "number", presets.KindString: "word",
	presets.KindIntList: "list of whole numbers (a,b)", presets.KindWordList: "list of words (a,b)",
}

// writeSettings lists every --set key with its kind, default and help.
func writeSettings(w io.Writer, markdown bool) {
	if markdown {
		fmt.Fprint(w, "`--set KEY=VALUE` (repeatable) overrides a preset's setting on `mkbench run`, `tui` and `experiment`; `-` may stand for `_` in a key. "+
			"The defaults are the preset's: below, each key's value in the presets that use it (a preset that does not use a key refuses it).\n\n")
		fmt.Fprint(w, "| key | kind | default (the preset's) | what it sets |\n|---|---|---|---|\n")
	} else {
		fmt.Fprintln(w, wrap("--set KEY=VALUE (repeatable) overrides a preset's setting on mkbench run, tui and experiment; - may stand for _ in a key. "+
			"The defaults are the preset's: each key's value in the presets that use it is given (a preset that does not use a key refuses it). "+
			"--iters, --seed, --eval-tasks, --val-every, --val-tasks, --image-size, --channels, --backbone, --way, --shot, --query, --sources and --test-sources are shorthands of the same keys.", "", helpWidth))
	}
	for _, k := range presets.OverrideKeys() {
		def := settingDefault(k.Key)
		if markdown {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", k.Key, kindNames[k.Kind], strings.ReplaceAll(def, "|", `\|`), strings.ReplaceAll(k.Help, "|", `\|`))
			continue
		}
		fmt.Fprintf(w, "\n  %s (%s)\n%s\n%s\n", k.Key, kindNames[k.Kind], wrap(k.Help, "      ", helpWidth), wrap("default: "+def, "      ", helpWidth))
	}
}

// settingDefault says a key's default: its value in each preset that uses
// it, the presets grouped by value ("1000 (sine-3shot, sine-5shot); 40000
// (omniglot-5w1s)"), at most four values named.
func settingDefault(key string) string {
	type group struct {
		value string
		names []string
	}
	var groups []group
	for _, p := range presets.All() {
		v, ok := presetValue(p, key)
		if !ok {
			continue
		}
		i := slices.IndexFunc(groups, func(g group) bool { return g.value == v })
		if i < 0 {
			groups = append(groups, group{value: v})
			i = len(groups) - 1
		}
		groups[i].names = append(groups[i].names, p.Name)
	}
	if len(groups) == 0 {
		return "none: no preset uses it"
	}
	slices.SortStableFunc(groups, func(a, b group) int { return len(b.names) - len(a.names) })
	var parts []string
	for i, g := range groups {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("%d more values", len(groups)-4))
			break
		}
		if len(groups) == 1 {
			return g.value + " (every preset that uses it)"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", g.value, shortList(g.names)))
	}
	return strings.Join(parts, "; ")
}

// shortList names up to three presets, then how many more.
func shortList(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
}

// presetValue is key's value in preset p's config as --set writes it, and
// whether p uses the key at all: a preset that refuses the override of its
// own value (ErrUnusedKey) does not.
func presetValue(p presets.Preset, key string) (string, bool) {
	c := p.Config
	var v any
	switch key {
	case "backbone":
		switch {
		case c.ResNet != nil:
			v = engine.BackboneResNet18
		case c.Conv != nil && c.Conv.Blocks == 5:
			v = "conv5"
		case c.Conv != nil:
			v = "conv4"
		}
	case "image_size", "channels":
		switch {
		case c.Conv != nil:
			v = map[string]int{"image_size": c.Conv.Height, "channels": c.Conv.Channels}[key]
		case c.ResNet != nil:
			v = map[string]int{"image_size": c.ResNet.Height, "channels": c.ResNet.Channels}[key]
		}
	case "conv_filters", "conv_keep":
		if c.Conv != nil {
			v = map[string]any{"conv_filters": c.Conv.Filters, "conv_keep": c.Conv.Keep}[key]
		}
	case "max_support":
		v = c.Shot
	default:
		b, _ := json.Marshal(c)
		var m map[string]any
		json.Unmarshal(b, &m)
		v = m[key]
	}
	if v == nil {
		v = zeroValue(key)
	}
	if _, _, err := (presets.Spec{Preset: p.Name, Overrides: presets.Overrides{key: v}}).Config(); errors.Is(err, presets.ErrUnusedKey) {
		return "", false
	}
	switch x := v.(type) {
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, fmt.Sprint(e))
		}
		return strings.Join(parts, ","), true
	case string:
		if x == "" {
			return `""`, true
		}
	}
	return fmt.Sprint(v), true
}

// zeroValue is the value of a key a config leaves out (omitempty): its
// kind's zero.
func zeroValue(key string) any {
	for _, k := range presets.OverrideKeys() {
		if k.Key == key {
			switch k.Kind {
			case presets.KindString:
				return ""
			case presets.KindIntList, presets.KindWordList:
				return []any{}
			}
		}
	}
	return 0
}

// environment is every variable mkbench reads, and what for.
var environment = []struct{ name, help string }{
	{"MKBENCH_RUNS", "the runs root: where new runs, experiments and sweeps go without --out, and what mkbench runs and tui --runs list (default ./runs)"},
	{"MKBENCH_DATA", "the folder holding the data sets, one folder each (omniglot, cifarfs, miniimagenet, domainnet, embeddings, …); --data overrides it for a command (default ./data, else ../shared/data)"},
	{"MKBENCH_CACHE", "where decoded data sets are cached (default the mkbench folder of the user's cache directory: $XDG_CACHE_HOME or ~/.cache on Linux)"},
	{"MKBENCH_MD_STREAM", "1: read every Meta-Dataset source from its records as images are drawn instead of decoding it whole (for a machine short of memory)"},
	{"MKBENCH_DEVICE", "the device of run, eval, experiment, tui and sweep units when --device is not given: cpu, opencl, opencl:N or auto (default cpu); sweep run and resume pass their --device to the workers through it (docs/gpu.md)"},
	{"MKBENCH_OPENCL_LIB, MKBENCH_CLBLAST_LIB", "the files of the OpenCL loader and of CLBlast to load instead of libOpenCL.so.1 and libclblast.so.1 (a GPU host without the packages)"},
	{"OCL_ICD_VENDORS, POCL_CACHE_DIR", "read by the OpenCL loader (the vendor drivers: a folder of .icd files or a driver's file) and by PoCL (where it keeps compiled kernels): not mkbench's own"},
	{"CI", "set (to anything): mkbench never opens the workbench, and tests that need data they do not find fail instead of skipping"},
	{"NO_COLOR", "set: the workbench draws without colour (overlaid curves are then told apart by their marks)"},
	{"SLURM_JOB_ID, SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_RESTART_COUNT", "set by Slurm: a sweep's worker records its job in the run's lock and counts requeues (mkbench sets none of them)"},
	{"MKBENCH_SWEEP_PARENT", "set by the local sweep engine for its workers: the coordinator's pid, which a worker watches (not for users)"},
}

// writeEnvironment lists the environment variables mkbench reads.
func writeEnvironment(w io.Writer, markdown bool) {
	if markdown {
		fmt.Fprint(w, "| variable | what it does |\n|---|---|\n")
		for _, e := range environment {
			fmt.Fprintf(w, "| `%s` | %s |\n", strings.ReplaceAll(e.name, ", ", "`, `"), e.help)
		}
		return
	}
	fmt.Fprintln(w, "Environment variables mkbench reads:")
	for _, e := range environment {
		fmt.Fprintf(w, "\n  %s\n%s\n", e.name, wrap(e.help, "      ", helpWidth))
	}
}
