package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mkbench/mkbench/datasets/fetch"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// Shell completion is one function, complete, which the scripts mkbench
// completion prints call back through the hidden mkbench __complete: the
// shells only hand over the words and show what comes back, so the
// commands, flags and values have one source, the command table and each
// command's flags, as the help pages have.

var (
	completionCommand = command{name: "completion", synopsis: "a shell completion script for bash, zsh or fish",
		usage: []string{"completion bash|zsh|fish"},
		long: "Prints a script that completes mkbench's commands, subcommands and flags, and the values mkbench knows: presets after --preset, " +
			"variants, --set keys, shipped models, help topics, data sets, directories and files. The script asks mkbench itself for them, so it " +
			"stays true when mkbench changes; the mkbench it runs is the one on your PATH." +
			"\n\n" +
			"bash: put source <(mkbench completion bash) in ~/.bashrc, or write the script to ~/.local/share/bash-completion/completions/mkbench. " +
			"zsh: put source <(mkbench completion zsh) in ~/.zshrc after compinit, or write the script to ~/.zfunc/_mkbench and put fpath=(~/.zfunc $fpath) before compinit. " +
			"fish: mkbench completion fish > ~/.config/fish/completions/mkbench.fish.",
		examples: []string{"mkbench completion bash > ~/.local/share/bash-completion/completions/mkbench", "mkbench completion zsh > ~/.zfunc/_mkbench",
			"mkbench completion fish > ~/.config/fish/completions/mkbench.fish"},
		run: cmdCompletion}
	completeCommand = command{name: "__complete", hidden: true, synopsis: "the candidates for the last of the words given (the completion scripts' call)",
		usage: []string{"__complete WORD ..."}, run: cmdComplete}
)

// The directive is the last line of mkbench __complete's answer: what the
// shell does with the candidates above it.
const (
	directiveWords   = ":words"   // offer the candidates, a space after the one chosen
	directiveNoSpace = ":nospace" // offer them with no space after (--set KEY=, a list's next item)
	directiveFiles   = ":files"   // complete file names the shell's own way
	directiveDirs    = ":dirs"    // complete directory names
)

// completion is complete's answer.
type completion struct {
	words     []string
	directive string
}

// cmdComplete prints the candidates for the last of args, the words of a
// command line after mkbench (the last the one being typed, maybe ""),
// one a line, then the directive.
func cmdComplete(args []string, stdout, stderr io.Writer) int {
	c := complete(args)
	for _, w := range c.words {
		fmt.Fprintln(stdout, w)
	}
	fmt.Fprintln(stdout, c.directive)
	return 0
}

// complete says what may come in the place of the last of args, the words
// after mkbench: a command, a subcommand, a flag, a flag's value or a
// command's argument.
func complete(args []string) completion {
	if len(args) == 0 {
		args = []string{""}
	}
	done, cur := args[:len(args)-1], args[len(args)-1]
	if len(done) == 0 {
		if strings.HasPrefix(cur, "-") {
			return candidates(cur, "--help", "--version")
		}
		return candidates(cur, topCommands()...)
	}
	c := lookupCommand(done[0])
	if c == nil || c.hidden || strings.Contains(done[0], " ") {
		return completion{directive: directiveFiles}
	}
	rest := done[1:]
	if len(rest) > 0 {
		if sc := lookupCommand(c.name + " " + rest[0]); sc != nil {
			c, rest = sc, rest[1:]
		}
	} else if subs := subcommands(c.name); len(subs) > 0 && !strings.HasPrefix(cur, "-") {
		return candidates(cur, subs...)
	}
	fs := commandFlags(c)
	// Walk the words given: the flags with their values, and the
	// arguments, counted, so that the word typed is known to be a flag's
	// value or which argument it is.
	var pending *flag.Flag
	var given []string
	for _, w := range rest {
		if pending != nil {
			pending = nil
			continue
		}
		if w == "--" { // the flag package's end of flags; mkbench's commands take none after it
			continue
		}
		if name, ok := flagName(w); ok {
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && !strings.Contains(w, "=") {
				pending = f
			}
			continue
		}
		given = append(given, w)
	}
	if pending != nil {
		return flagValues(c, pending, cur, "", done)
	}
	if strings.HasPrefix(cur, "-") {
		if name, value, ok := strings.Cut(strings.TrimLeft(cur, "-"), "="); ok {
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) {
				return flagValues(c, f, value, "--"+name+"=", done)
			}
			return completion{directive: directiveWords}
		}
		return candidates(cur, flagNames(fs)...)
	}
	if comp, ok := argValues(c, given, cur); ok {
		return comp
	}
	return candidates(cur, flagNames(fs)...)
}

// candidates are the words that start with prefix.
func candidates(prefix string, words ...string) completion {
	out := completion{directive: directiveWords}
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out.words = append(out.words, w)
		}
	}
	return out
}

// flagName is the name of the flag word w is ("--preset" → "preset",
// "--set=lr=1" → "set=lr=1"), and whether it is one: "-" and "--" alone
// are not.
func flagName(w string) (string, bool) {
	name := strings.TrimPrefix(strings.TrimPrefix(w, "-"), "-")
	if !strings.HasPrefix(w, "-") || name == "" {
		return "", false
	}
	return name, true
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagNames are a command's flags as typed, in its order, then --help.
func flagNames(fs *flagSet) []string {
	var out []string
	for _, n := range fs.order {
		out = append(out, "--"+n)
	}
	return append(out, "--help")
}

// flagCapture is a writer that writeHelp hands a command's flag set to
// instead of writing its help page: how commandFlags gets the flags from
// where the command defines them.
type flagCapture struct{ fs *flagSet }

func (*flagCapture) Write(p []byte) (int, error) { return len(p), nil }

// commandFlags is command c's flag set, as its help page gets it: c runs
// with --help, which parses nothing else and does nothing else.
func commandFlags(c *command) *flagSet {
	var fc flagCapture
	c.run([]string{"--help"}, &fc, io.Discard)
	if fc.fs == nil { // every command's --help reaches writeHelp; none would leave no flags
		return newFlags(c.name)
	}
	return fc.fs
}

// flagValues are the values flag f of command c can take that start with
// typed, each after prefix ("--preset=" when the value is typed in the
// flag's word): known names, the words of an a|b metavar, directories
// for a DIR and files for a FILE; nothing for a number or free text.
func flagValues(c *command, f *flag.Flag, typed, prefix string, done []string) completion {
	var names []string
	switch f.Name {
	case "preset":
		for _, p := range presets.All() {
			names = append(names, p.Name)
		}
	case "variant":
		names = engine.Variants
	case "variants":
		return listValues(typed, prefix, engine.Variants)
	case "set":
		if strings.Contains(typed, "=") {
			return completion{directive: directiveWords} // a value: free
		}
		comp := candidates(typed, settingKeys()...)
		for i, k := range comp.words {
			comp.words[i] = prefix + k + "="
		}
		comp.directive = directiveNoSpace
		return comp
	case "model":
		names = modelNames(done)
	case "sort":
		names = append(names, runs.SortKeys...)
		for _, k := range runs.SortKeys {
			names = append(names, "-"+k)
		}
	case "backbone":
		names = []string{"conv4", "conv5", engine.BackboneResNet18}
	case "device":
		names = deviceValues(typed)
	default:
		switch m := strings.Trim(metavar(c.name, f), " []"); {
		case m == "DIR" || m == "DIR2":
			return completion{directive: directiveDirs}
		case m == "FILE" || strings.Contains(m, "FILE"):
			return completion{directive: directiveFiles}
		case strings.Contains(m, "|") && m == strings.ToLower(m):
			names = strings.Split(m, "|")
		default:
			return completion{directive: directiveWords}
		}
	}
	comp := candidates(typed, names...)
	for i, w := range comp.words {
		comp.words[i] = prefix + w
	}
	return comp
}

// listValues completes the last item of a comma-separated list.
func listValues(typed, prefix string, names []string) completion {
	head := ""
	if i := strings.LastIndex(typed, ","); i >= 0 {
		head, typed = typed[:i+1], typed[i+1:]
	}
	comp := candidates(typed, names...)
	for i, w := range comp.words {
		comp.words[i] = prefix + head + w
	}
	return comp
}

// modelNames are the models of the folder --models-dir names among the
// words given, else those shipped in mkbench.
func modelNames(done []string) []string {
	lib := models.Shipped()
	for i, w := range done {
		if v, ok := strings.CutPrefix(w, "--models-dir="); ok {
			lib = models.Dir(v)
		} else if w == "--models-dir" && i+1 < len(done) {
			lib = models.Dir(done[i+1])
		}
	}
	infos, _ := lib.List() // a damaged model is still listed, by name
	var names []string
	for _, m := range infos {
		names = append(names, m.Name)
	}
	return names
}

// argValues completes the argument of command c after the arguments
// given, from the names its usage gives them: the names a command's NAME
// takes (experiment's suites, the data sets data get downloads), help's
// topics, the shells, and directories (DIR, RUN) or else files. ok is false where c takes no more arguments.
func argValues(c *command, given []string, typed string) (completion, bool) {
	args := usageArgs(c)
	if len(given) >= len(args) {
		return completion{}, false
	}
	switch c.name {
	case "help":
		if len(given) == 0 {
			return candidates(typed, append(topCommands(), "settings", "environment")...), true
		}
		return candidates(typed, subcommands(given[0])...), true
	case "experiment":
		return candidates(typed, experiments.Names...), true
	case "data get":
		var names []string
		for _, f := range fetch.Families {
			if f.Downloadable() { // the others only say where to get them; mkbench data lists them all
				names = append(names, f.Name)
			}
		}
		return candidates(typed, names...), true
	case "completion":
		return candidates(typed, shells...), true
	}
	switch args[len(given)] {
	case "DIR", "RUN":
		return completion{directive: directiveDirs}, true
	}
	return completion{directive: directiveFiles}, true
}

// usageArgs are the arguments of c's first usage form, before its flags:
// "sweep plan FILE [--json]" → FILE, "help [CMD [SUB]]" → CMD, SUB.
func usageArgs(c *command) []string {
	if len(c.usage) == 0 {
		return nil
	}
	words := strings.Fields(c.usage[0])
	var out []string
	for _, w := range words[min(len(words), len(strings.Fields(c.name))):] {
		if strings.HasPrefix(strings.TrimLeft(w, "["), "-") {
			break
		}
		out = append(out, strings.Trim(w, "[]"))
	}
	return out
}

// shells are those mkbench completion writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// cmdCompletion prints the completion script for a shell.
func cmdCompletion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("completion")
	shell := ""
	shell, args = leadingArg(shell, args)
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	if shell == "" {
		return fail(stderr, fmt.Errorf("completion: name the shell: mkbench completion bash|zsh|fish (mkbench help completion)"))
	}
	script, ok := completionScripts[shell]
	if !ok {
		return unknownName(stderr, "shell", shell, shells, "completion")
	}
	fmt.Fprint(stdout, script)
	return 0
}

// completionScripts are the shells' wrappers of mkbench __complete: each
// hands over the words of the line up to the cursor and acts on the
// directive. bash splits --flag=value at "=" (COMP_WORDBREAKS), so its
// wrapper joins such words again and takes back what bash counts as the
// word before "=" from the candidates.
var completionScripts = map[string]string{
	"bash": `# bash completion for mkbench: source <(mkbench completion bash)
_mkbench() {
    local cur=${COMP_WORDS[COMP_CWORD]} i w n
    local -a words=() lines=()
    for ((i = 1; i <= COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        n=${#words[@]}
        if ((n > 0)) && [[ $w == "=" || ${words[n-1]} == *= ]]; then
            words[n-1]+=$w
        else
            words+=("$w")
        fi
    done
    mapfile -t lines < <(command mkbench __complete "${words[@]}" 2>/dev/null)
    n=${#lines[@]}
    ((n > 0)) || return 0
    local directive=${lines[n-1]} last=${words[${#words[@]}-1]}
    unset 'lines[n-1]'
    local strip=${last%"$cur"}
    COMPREPLY=()
    case $directive in
    :files)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        compopt -o filenames 2>/dev/null || true ;;
    :dirs)
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        compopt -o filenames 2>/dev/null || true ;;
    *)
        for w in "${lines[@]}"; do
            COMPREPLY+=("${w#"$strip"}")
        done
        if [[ $directive == :nospace ]]; then
            compopt -o nospace 2>/dev/null || true
        fi ;;
    esac
}
complete -F _mkbench mkbench
`,
	"zsh": `#compdef mkbench
# zsh completion for mkbench: source <(mkbench completion zsh) after compinit,
# or this file as _mkbench in a folder of $fpath.
_mkbench() {
    local -a lines cands
    local directive
    lines=("${(@f)$(command mkbench __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    (( ${#lines} )) || return 1
    directive=${lines[-1]}
    cands=("${(@)lines[1,-2]}")
    case $directive in
    :files|:dirs)
        [[ $PREFIX == --*=* ]] && compset -P '*='
        if [[ $directive == :dirs ]]; then _files -/; else _files; fi ;;
    :nospace) compadd -S '' -- "${cands[@]}" ;;
    *) compadd -- "${cands[@]}" ;;
    esac
}
if [[ $funcstack[1] == _mkbench ]]; then
    _mkbench "$@"
else
    compdef _mkbench mkbench
fi
`,
	"fish": `# fish completion for mkbench: mkbench completion fish > ~/.config/fish/completions/mkbench.fish
function __mkbench_complete
    set -l words (commandline -opc)
    set -e words[1]
    set -l out (command mkbench __complete $words (commandline -ct) 2>/dev/null)
    test (count $out) -gt 0; or return
    set -l directive $out[-1]
    set -e out[-1]
    switch $directive
        case :files
            __fish_complete_path (commandline -ct)
        case :dirs
            __fish_complete_directories (commandline -ct)
        case '*'
            printf '%s\n' $out
    end
end
complete -c mkbench -f -a '(__mkbench_complete)'
`,
}

// deviceValues are --device's values: cpu, opencl, auto and opencl:N.
// The devices are counted only once opencl: is typed, since counting
// loads the OpenCL loader and its drivers; without one, opencl:0 stands.
func deviceValues(typed string) []string {
	names := append(slices.Clone(deviceWords), "opencl:0")
	if !strings.HasPrefix(typed, "opencl:") {
		return names
	}
	devs, err := opencl.Devices()
	if err != nil || len(devs) == 0 {
		return names
	}
	names = names[:len(deviceWords)]
	for _, d := range devs {
		names = append(names, fmt.Sprintf("opencl:%d", d.Index))
	}
	return names
}
