package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// flagSet is a command's flags as the flag package parses them, plus what
// its help page needs and the flag package does not keep: the order the
// command defines them in (the order they matter, not the alphabet) and
// the hidden aliases kept for old scripts.
type flagSet struct {
	*flag.FlagSet
	order   []string
	aliases map[string]string // hidden alias → the flag it stands for
}

// newFlags returns a flag set that reports errors through our one-line
// format instead of printing the whole usage.
func newFlags(name string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, aliases: map[string]string{}}
}

func (fs *flagSet) String(name, value, usage string) *string {
	fs.order = append(fs.order, name)
	return fs.FlagSet.String(name, value, usage)
}

func (fs *flagSet) Int(name string, value int, usage string) *int {
	fs.order = append(fs.order, name)
	return fs.FlagSet.Int(name, value, usage)
}

func (fs *flagSet) Int64(name string, value int64, usage string) *int64 {
	fs.order = append(fs.order, name)
	return fs.FlagSet.Int64(name, value, usage)
}

func (fs *flagSet) Float64(name string, value float64, usage string) *float64 {
	fs.order = append(fs.order, name)
	return fs.FlagSet.Float64(name, value, usage)
}

func (fs *flagSet) Bool(name string, value bool, usage string) *bool {
	fs.order = append(fs.order, name)
	return fs.FlagSet.Bool(name, value, usage)
}

func (fs *flagSet) Func(name, usage string, fn func(string) error) {
	fs.order = append(fs.order, name)
	fs.FlagSet.Func(name, usage, fn)
}

// alias makes --old set the flag --name: an old spelling that scripts
// may still use, left out of the help. parse reports it as name.
func (fs *flagSet) alias(old, name string) {
	fs.FlagSet.Var(fs.Lookup(name).Value, old, "")
	fs.aliases[old] = name
}

// parse parses args and returns the names of the flags they set, which
// is how a command tells a flag left at its default from one given.
func parse(fs *flagSet, args []string) (map[string]bool, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, flagError(fs, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected argument %q (flags are written --name value; mkbench help %s)", fs.Name(), fs.Arg(0), fs.Name())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		if n, ok := fs.aliases[f.Name]; ok {
			set[n] = true
			return
		}
		set[f.Name] = true
	})
	return set, nil
}

// flagError rewrites the flag package's parse errors as ours: flags
// written --name, a mistyped one with the nearest flag it could mean,
// and the command's help page named.
func flagError(fs *flagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		line := fmt.Sprintf("unknown flag --%s", name)
		if s := suggest(name, fs.order); s != "" {
			line += fmt.Sprintf("; did you mean --%s?", s)
		}
		return fmt.Errorf("%s (mkbench help %s)", line, fs.Name())
	}
	// "invalid value "ten" for flag -iters: parse error", "flag needs an
	// argument: -out": the flag as users write it.
	for _, marker := range []string{"for flag -", "argument: -"} {
		if i := strings.Index(msg, marker); i >= 0 {
			msg = msg[:i+len(marker)-1] + "--" + strings.TrimPrefix(msg[i+len(marker):], "-")
		}
	}
	return fmt.Errorf("%s: %s (mkbench help %s)", fs.Name(), msg, fs.Name())
}

// checkPositive names the first of the int flags names that was set to a
// value below 1.
func checkPositive(fs *flagSet, set map[string]bool, names ...string) error {
	for _, n := range names {
		if set[n] && fs.Lookup(n).Value.(flag.Getter).Get().(int) <= 0 {
			return fmt.Errorf("%s: --%s must be positive, got %s", fs.Name(), n, fs.Lookup(n).Value)
		}
	}
	return nil
}

// parseArgs parses a command's flags as parse does, then answers --help
// with the command's help page (exit 0) and a bad flag, a non-positive
// value of one of the int flags positive, or a negative --seed with one
// error line (exit 1). ok is false when the command is done, code being
// its exit status.
func parseArgs(fs *flagSet, args []string, stdout, stderr io.Writer, positive ...string) (set map[string]bool, code int, ok bool) {
	set, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		writeHelp(stdout, fs)
		return nil, 0, false
	}
	if err == nil {
		err = checkPositive(fs, set, positive...)
	}
	if err == nil && set["seed"] {
		if s := fs.Lookup("seed").Value.(flag.Getter).Get().(int64); s < 0 {
			err = fmt.Errorf("%s: --seed must be ≥ 0, got %d", fs.Name(), s)
		}
	}
	if err != nil {
		return nil, fail(stderr, err), false
	}
	return set, 0, true
}

// checkResume refuses, for a command given --resume, every flag set that
// its table entry does not list among those a resume takes: the run or
// experiment keeps its own settings.
func checkResume(fs *flagSet, set map[string]bool) error {
	c := lookupCommand(fs.Name())
	for _, n := range fs.order {
		if set[n] && n != "resume" && !contains(c.resumeTakes, n) {
			return fmt.Errorf("%s: --%s cannot be changed when resuming (the %s keeps its own settings); with --resume only %s can be given",
				fs.Name(), n, c.resumes, flagList(c.resumeTakes))
		}
	}
	return nil
}

// flagList writes names as "--a, --b and --c".
func flagList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "--" + n
	}
	if len(out) < 2 {
		return strings.Join(out, "")
	}
	return strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest is the one of names nearest to typed by edit distance, when it
// is near enough to be a slip (at most a third of its letters, and at
// least one, differ), else "".
func suggest(typed string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		d := editDistance(strings.ToLower(typed), strings.ToLower(n))
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD < 0 || bestD > max(1, len([]rune(typed))/3) {
		return ""
	}
	return best
}

// editDistance is the edit distance of a and b in runes, a swap of two
// neighbours counting as one edit (the optimal string alignment
// distance): "rnu" is one slip from "run".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// knownPresetAndVariant refuses a preset or variant name that does not
// exist, naming the nearest one that does when the name is a slip; ""
// is left to the command (a variant left out is the preset's).
func knownPresetAndVariant(preset, variant string) error {
	var names []string
	for _, p := range presets.All() {
		names = append(names, p.Name)
	}
	if preset != "" && !contains(names, preset) {
		return unknownError("preset", preset, names, "mkbench presets lists them")
	}
	if variant != "" && !contains(engine.Variants, variant) {
		return unknownError("variant", variant, engine.Variants, "choose one of "+strings.Join(engine.Variants, ", "))
	}
	return nil
}

// unknownError is `unknown preset "x"; did you mean y? (hint)`.
func unknownError(what, typed string, known []string, hint string) error {
	msg := fmt.Sprintf("unknown %s %q", what, typed)
	if s := suggest(typed, known); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", s)
	}
	return fmt.Errorf("%s (%s)", msg, hint)
}

// leadingArg takes the argument a command names before its flags (mkbench
// export DIR --format csv): the first of args when it is not a flag, else
// def, and returns the rest for the flag set.
func leadingArg(def string, args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return def, args
}
