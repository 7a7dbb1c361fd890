package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

const usage = `mkbench: a workbench for MetaKernel few-shot learning

Usage:
  mkbench                       open the workbench (terminal UI): pick a preset, watch it train
  mkbench tui [--preset NAME] [--iters N] [--seed S] [--data DIR]
                                the workbench, optionally starting a preset at once
  mkbench run --preset NAME [--variant V] [--iters N] [--minutes M] [--seed S] [--out DIR]
              [--eval-tasks N] [--val-every N] [--val-tasks N] [--data DIR]
  mkbench run --resume DIR [--iters N] [--data DIR]
  mkbench eval --run DIR [--eval-tasks N] [--way W] [--shot K] [--query Q] [--data DIR] [--json]
  mkbench experiment NAME --preset P [--variants V,..] [--seeds S,..] [--iters N] [--bases D,..]
              [--ways N,..] [--shots K,..] [--eval-tasks N] [--minutes M] [--run DIR] [--out DIR]
                                NAME: ablation, versatility, efficiency, shots
  mkbench experiment --resume DIR
  mkbench report DIR            redraw an experiment's tables and figures
  mkbench presets               list presets
  mkbench --version

Variants: rbf, rff, vrf, vrf+ctx, vrf+cnf, metakernel.
Runs go to ./runs (or $MKBENCH_RUNS) unless --out is given.
`

func cli(args []string, stdout, stderr *os.File) int {
	if len(args) == 0 {
		return cmdTUI(nil, stdout, stderr)
	}
	switch args[0] {
	case "tui":
		return cmdTUI(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "eval":
		return cmdEval(args[1:], stdout, stderr)
	case "experiment":
		return cmdExperiment(args[1:], stdout, stderr)
	case "report":
		return cmdReport(args[1:], stdout, stderr)
	case "presets":
		for _, p := range presets.All() {
			fmt.Fprintf(stdout, "%-14s %s\n", p.Name, p.Summary())
		}
		return 0
	case "--version", "-version", "version":
		fmt.Fprintf(stdout, "mkbench %s\n", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	return fail(stderr, fmt.Errorf("unknown command %q (run mkbench help for the list)", args[0]))
}

// newFlags returns a flag set that reports errors through our one-line
// format instead of printing the whole usage.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses args and returns the names of the flags they set, which
// is how a command tells a flag left at its default from one given.
func parse(fs *flag.FlagSet, args []string) (map[string]bool, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %v (see mkbench help)", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected argument %q (flags are written --name value)", fs.Name(), fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set, nil
}

// checkPositive names the first of the int flags names that was set to a
// value below 1.
func checkPositive(fs *flag.FlagSet, set map[string]bool, names ...string) error {
	for _, n := range names {
		if set[n] && fs.Lookup(n).Value.(flag.Getter).Get().(int) <= 0 {
			return fmt.Errorf("%s: --%s must be positive, got %s", fs.Name(), n, fs.Lookup(n).Value)
		}
	}
	return nil
}

// parseArgs parses a command's flags as parse does, then answers --help
// with the flags (exit 0) and a bad flag, a non-positive value of one of
// the int flags positive, or a negative --seed with one error line (exit
// 1). ok is false when the command is done, code being its exit status.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr *os.File, positive ...string) (set map[string]bool, code int, ok bool) {
	set, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		flagHelp(fs, stdout)
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

func flagHelp(fs *flag.FlagSet, w io.Writer) {
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// dataHelp is the --data flag's help: the folder depends on the preset's
// data set.
const dataHelp = "folder of the preset's data set, e.g. the one holding Omniglot's images_background.zip and images_evaluation.zip (default: $MKBENCH_DATA/<set>, ./data/<set> or ../shared/data/<set>, <set> being omniglot, cifarfs, miniimagenet, domainnet or embeddings)"

func cmdRun(args []string, stdout, stderr *os.File) int {
	fs := newFlags("run")
	preset := fs.String("preset", "", "preset name (see mkbench presets)")
	variant := fs.String("variant", "", "rbf, rff, vrf, vrf+ctx, vrf+cnf or metakernel (default: the preset's)")
	iters := fs.Int("iters", 0, "training iterations (default: the preset's)")
	fs.Int64("seed", -1, "random seed (default: the preset's)")
	out := fs.String("out", "", "run directory (default: a new folder under ./runs or $MKBENCH_RUNS)")
	fs.Int("eval-tasks", 0, "tasks in the final evaluation (default: the preset's)")
	resume := fs.String("resume", "", "continue the interrupted run in this directory")
	quiet := fs.Bool("quiet", false, "print only the final result")
	data := fs.String("data", "", dataHelp)
	minutes := fs.Float64("minutes", 0, "stop training after this many minutes of training time, then evaluate (default: no limit)")
	fs.Int("val-every", 0, "validate every N iterations (classification presets; default: the preset's)")
	fs.Int("val-tasks", 0, "episodes per validation (default: the preset's)")
	set, code, ok := parseArgs(fs, args, stdout, stderr, "iters", "eval-tasks", "val-every", "val-tasks")
	if !ok {
		return code
	}
	if set["minutes"] && !(*minutes > 0) {
		return fail(stderr, fmt.Errorf("run: --minutes must be positive, got %g", *minutes))
	}

	var cfg engine.Config
	// start is the first progress line, printed once the task data has
	// loaded: a missing data folder should not be preceded by "training…".
	var presetName, dir, family, start string
	if *resume != "" {
		for _, n := range []string{"preset", "variant", "seed", "out", "eval-tasks", "val-every", "val-tasks"} {
			if set[n] {
				return fail(stderr, fmt.Errorf("run: --%s cannot be changed when resuming (the run keeps its own settings); only --iters can", n))
			}
		}
		ck, err := engine.LoadCheckpoint(filepath.Join(*resume, engine.FileCheckpoint))
		if err != nil {
			return fail(stderr, err)
		}
		cfg, presetName, dir, family = ck.Config, ck.Preset, *resume, ck.Source
		if set["iters"] {
			if *iters < ck.Iter {
				return fail(stderr, fmt.Errorf("run: --iters %d is below the %d iterations already done", *iters, ck.Iter))
			}
			cfg.Iters = *iters
		}
		start = fmt.Sprintf("resuming %s at iteration %d of %d", dir, ck.Iter, cfg.Iters)
	} else {
		if *preset == "" {
			return fail(stderr, errors.New("run: --preset is required (see mkbench presets), or --resume DIR"))
		}
		ov := presets.Overrides{}
		for _, n := range []string{"iters", "seed", "eval-tasks", "val-every", "val-tasks"} {
			if set[n] {
				ov[n] = fs.Lookup(n).Value.(flag.Getter).Get()
			}
		}
		p, c, err := presets.Spec{Preset: *preset, Variant: *variant, Overrides: ov}.Config()
		if err != nil {
			return fail(stderr, err)
		}
		cfg, presetName = c, p.Name
		family = p.Source
		dir = *out
		if dir == "" {
			dir = presets.NewRunDir(presets.RunsRoot(), p.Name, cfg.Variant(), cfg.Seed, time.Now())
		}
		start = fmt.Sprintf("training %s, variant %s, seed %d, %d iterations → %s", presetName, cfg.Variant(), cfg.Seed, cfg.Iters, dir)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var obs engine.Observer
	if !*quiet {
		obs = progressPrinter(stdout)
	}
	srcs, err := presets.NewSources(family, cfg, *data)
	if err != nil {
		return fail(stderr, err)
	}
	if !*quiet {
		fmt.Fprintln(stdout, start)
	}
	opts := engine.RunOptions{Preset: presetName, Dir: dir, Resume: *resume != "", Val: srcs.Val, Test: srcs.Test,
		Budget: time.Duration(*minutes * float64(time.Minute))}
	res, err := engine.Run(ctx, cfg, srcs.Train, opts, obs)
	if res.Interrupted && (errors.Is(err, context.Canceled) || errors.Is(err, engine.ErrStopped)) {
		fmt.Fprintf(stderr, "mkbench: interrupted at iteration %d; checkpoint saved; continue with: mkbench run --resume %s\n", res.Iters, dir)
		return 130
	}
	if err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "done: %d iterations in %.1fs (%.2f ms/iter); eval %s\n", res.Iters, res.TrainSeconds, res.MsPerIter, res.Eval)
	fmt.Fprintf(stdout, "files: %s\n", dir)
	return 0
}

// cmdTUI opens the workbench. It needs a terminal on both ends; without
// one (a pipe, a CI job) it says so and points at the headless command.
func cmdTUI(args []string, stdout, stderr *os.File) int {
	fs := newFlags("tui")
	preset := fs.String("preset", "", "start this preset at once (default: pick one)")
	iters := fs.Int("iters", 0, "training iterations (default: the preset's)")
	seed := fs.Int64("seed", -1, "random seed (default: the preset's)")
	data := fs.String("data", "", dataHelp)
	_, code, ok := parseArgs(fs, args, stdout, stderr, "iters")
	if !ok {
		return code
	}
	if *preset != "" {
		if _, err := presets.Get(*preset); err != nil {
			return fail(stderr, err)
		}
	}
	if why := noTerminal(os.Stdin, stdout); why != "" {
		return fail(stderr, fmt.Errorf("the workbench needs a terminal (%s); train headless with: mkbench run --preset sine-5shot (see mkbench help)", why))
	}
	if err := ui.Run(ui.Options{Preset: *preset, Iters: *iters, Seed: *seed, Data: *data}, stdout); err != nil {
		return fail(stderr, err)
	}
	return 0
}

// noTerminal says why the workbench cannot open, or "" when it can.
func noTerminal(in, out *os.File) string {
	switch {
	case os.Getenv("CI") != "":
		return "CI is set"
	case !term.IsTerminal(int(out.Fd())):
		return "stdout is not a terminal"
	case !term.IsTerminal(int(in.Fd())):
		return "stdin is not a terminal"
	}
	return ""
}

// progressPrinter prints a progress line every two seconds.
func progressPrinter(w io.Writer) engine.Observer {
	var last time.Time
	return engine.ObserverFunc(func(s engine.Snapshot) error {
		if s.Done || time.Since(last) < 2*time.Second {
			return nil
		}
		last = time.Now()
		fmt.Fprintf(w, "iter %6d/%d  loss %.4f  data %.4f  kl %.3f  λ %.4f  %.0f it/s  eta %s\n",
			s.Iter, s.Iters, s.Loss, s.Data, s.KL, s.Lambda, s.ItersPerSec, engine.FormatETA(engine.Remaining(s.Iter, s.Iters, s.ItersPerSec)))
		return nil
	})
}

func cmdEval(args []string, stdout, stderr *os.File) int {
	fs := newFlags("eval")
	run := fs.String("run", "", "run directory to evaluate")
	tasks := fs.Int("eval-tasks", 0, "number of evaluation tasks (default: the run's)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	data := fs.String("data", "", dataHelp)
	way := fs.Int("way", 0, "classification: evaluate on tasks of this many classes (default: as trained)")
	shot := fs.Int("shot", 0, "classification: support examples per class (default: as trained)")
	query := fs.Int("query", 0, "query points per task (per class when classifying; default: the run's); shot + query must fit the images a class has (20 for Omniglot)")
	set, code, ok := parseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if *run == "" {
		return fail(stderr, errors.New("eval: --run DIR is required"))
	}
	if err := checkPositive(fs, set, "eval-tasks", "way", "shot", "query"); err != nil {
		return fail(stderr, err)
	}
	// A run that validated is tested with its best-validation parameters,
	// as its summary was.
	path := filepath.Join(*run, engine.FileBest)
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join(*run, engine.FileCheckpoint)
	}
	ck, err := engine.LoadCheckpoint(path)
	if err != nil {
		return fail(stderr, err)
	}
	c := &ck.Config
	if (set["way"] || set["shot"]) && !c.Classify() {
		return fail(stderr, errors.New("eval: --way and --shot apply to classification runs only"))
	}
	if set["way"] {
		c.Way = *way
	}
	if set["shot"] {
		c.Shot = *shot
	}
	if set["query"] {
		// The training source is built too (the model is rebuilt on it),
		// so its queries follow.
		c.EvalQuery, c.Query = *query, *query
	}
	srcs, err := presets.NewSources(ck.Source, *c, *data)
	if err != nil {
		return fail(stderr, err)
	}
	m, err := ck.Model(srcs.Train)
	if err != nil {
		return fail(stderr, err)
	}
	defer m.Close()
	n := c.EvalTasks
	if set["eval-tasks"] {
		n = *tasks
	}
	test := srcs.Test
	if test == nil {
		test = srcs.Train
	}
	res, err := m.EvaluateOn(test, n, c.EvalQuery, c.EvalSamples, c.Seed)
	if err != nil {
		return fail(stderr, err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "%s (%s, %s, seed %d, iteration %d)\n", res, ck.Preset, c.Variant(), c.Seed, ck.Iter)
	var sum engine.Summary
	if b, err := os.ReadFile(filepath.Join(*run, engine.FileSummary)); err == nil && !set["way"] && !set["shot"] && !set["query"] && json.Unmarshal(b, &sum) == nil && sum.Eval != nil && sum.Eval.Tasks == res.Tasks {
		if sum.Eval.Mean == res.Mean {
			fmt.Fprintln(stdout, "matches summary.json")
		} else {
			fmt.Fprintf(stdout, "differs from summary.json (%.6g)\n", sum.Eval.Mean)
		}
	}
	return 0
}
