package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
	"github.com/mkbench/mkbench/ui"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func cli(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return cmdTUI(nil, stdout, stderr)
	}
	switch args[0] {
	case "--version", "-version":
		return cmdVersion(nil, stdout, stderr)
	case "-h", "--help":
		return cmdHelp(nil, stdout, stderr)
	}
	if c := lookupCommand(args[0]); c != nil && !strings.Contains(args[0], " ") {
		return c.run(args[1:], stdout, stderr)
	}
	return unknownName(stderr, "command", args[0], topCommands(), "")
}

// setHelp is the --set flag's help.
const setHelp = "override a preset setting, KEY=VALUE (repeatable): e.g. --set lr=0.0005 --set clip_norm=1 --set embed_hidden=64,64; mkbench help settings lists every key with its help and default"

// settingKeys lists the keys --set takes.
func settingKeys() []string {
	keys := presets.OverrideKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Key
	}
	return names
}

// setFlag adds the repeatable --set key=value flag to fs and returns the
// settings given, unparsed: overrides parses them after the flags, so
// every bad one is named in one error line.
func setFlag(fs *flagSet) *[]string {
	var raw []string
	fs.Func("set", setHelp, func(s string) error {
		raw = append(raw, s)
		return nil
	})
	return &raw
}

// overrides parses the --set settings and adds the value of each of the
// shorthand flags given (--iters is --set iters=N, --eval-tasks is --set
// eval_tasks=N, …). A bad setting, a key set twice, or a flag and a --set
// of the same key is an error naming each.
func overrides(fs *flagSet, set map[string]bool, sets *[]string, shorthands ...string) (presets.Overrides, error) {
	ov := presets.Overrides{}
	var errs []string
	for _, s := range *sets {
		k, v, err := presets.ParseSet(s)
		switch {
		case errors.Is(err, presets.ErrUnknownKey):
			errs = append(errs, unknownKey(s))
		case err != nil && k != "": // a known key's bad value: "lr=fast: want a number"
			errs = append(errs, "--set "+err.Error())
		case err != nil:
			errs = append(errs, "--set: "+err.Error())
		case ov[k] != nil:
			errs = append(errs, fmt.Sprintf("--set: %s is set twice", k))
		default:
			ov[k] = v
		}
	}
	for _, n := range shorthands {
		if !set[n] {
			continue
		}
		k := strings.ReplaceAll(n, "-", "_")
		if _, dup := ov[k]; dup {
			errs = append(errs, fmt.Sprintf("--%s and --set %s are the same setting; give one", n, k))
			continue
		}
		v := fs.Lookup(n).Value.(flag.Getter).Get()
		if x, ok := v.(int64); ok {
			v = int(x)
		}
		if x, ok := v.(string); ok {
			// A word list (--sources a,b) parses as --set would.
			_, pv, err := presets.ParseSet(k + "=" + x)
			if err != nil {
				errs = append(errs, fmt.Sprintf("--%s: %v", n, err))
				continue
			}
			v = pv
		}
		ov[k] = v
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", fs.Name(), strings.Join(errs, "; "))
	}
	return ov, nil
}

// unknownKey is the error for --set s whose key no run takes, with the
// nearest key when it is a slip.
func unknownKey(s string) string {
	k, _, _ := strings.Cut(s, "=")
	msg := fmt.Sprintf("--set: unknown setting %q", k)
	if near := suggest(strings.ReplaceAll(k, "-", "_"), settingKeys()); near != "" {
		msg += fmt.Sprintf("; did you mean %s?", near)
	}
	return msg + " (mkbench help settings lists them)"
}

// dataHelp is the --data flag's help: the folder depends on the preset's
// data set.
const dataHelp = "folder of the preset's data set, e.g. the one holding Omniglot's images_background.zip and images_evaluation.zip (default: $MKBENCH_DATA/<set>, ./data/<set> or ../shared/data/<set>, <set> being omniglot, cifarfs, miniimagenet, domainnet or embeddings)"

// runOpts are mkbench run's flags, parsed and checked: everything that
// can be refused without reading a file.
type runOpts struct {
	preset, variant, out, data string
	resume                     string // the run directory continued, or ""
	iters                      int    // with resume: set["iters"] raises the run's
	budget                     time.Duration
	ov                         presets.Overrides // a new run's settings
	set                        map[string]bool   // the flags given
	repair, startOver, quiet   bool
	device                     opencl.Selection // --device, or $MKBENCH_DEVICE
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseRun(args, stdout, stderr)
	if !ok {
		return code
	}
	return o.run(stdout, stderr)
}

// parseRun parses run's flags. ok is false when the command is done
// (--help, or a refusal already printed), code being its exit status.
func parseRun(args []string, stdout, stderr io.Writer) (o runOpts, code int, ok bool) {
	fs := newFlags("run")
	preset := fs.String("preset", "", "the preset to train (mkbench presets lists them)")
	variant := fs.String("variant", "", "rbf, rff, vrf, vrf+ctx, vrf+cnf or metakernel (default: the preset's)")
	iters := fs.Int("iters", 0, "training iterations (--set iters; default: the preset's)")
	minutes := fs.Float64("minutes", 0, "stop training after this many minutes of training time, then evaluate (default: no limit)")
	fs.Int64("seed", -1, "random seed (--set seed; default: the preset's)")
	out := fs.String("out", "", "run directory (default: a new folder under ./runs or $MKBENCH_RUNS)")
	data := fs.String("data", "", dataHelp)
	sets := setFlag(fs)
	fs.Int("eval-tasks", 0, "tasks in the final evaluation (--set eval_tasks; default: the preset's)")
	fs.Int("val-every", 0, "classification presets: validate every N iterations (--set val_every; default: the preset's)")
	fs.Int("val-tasks", 0, "episodes per validation (--set val_tasks; default: the preset's)")
	fs.Int("image-size", 0, "image presets: the side images are resized to (--set image_size; default: the preset's, 84 for folder presets; 32 trains far faster)")
	fs.Int("channels", 0, "image presets: 1 (grey) or 3 (RGB) (--set channels; default: the preset's; folder presets read it from the first image)")
	fs.String("backbone", "", "image presets: ψ, conv4, conv5 or resnet18 (--set backbone; default: the preset's)")
	fs.Int("way", 0, "classification: classes per task (--set way; default: the preset's)")
	fs.Int("shot", 0, "support examples per class (per task for regression) (--set shot; default: the preset's)")
	fs.Int("query", 0, "query examples per class in training (--set query; default: the preset's)")
	fs.String("sources", "", "Meta-Dataset presets: the sources to train on, a,b (--set sources; default ilsvrc_2012, else every source with training classes)")
	fs.String("test-sources", "", "Meta-Dataset presets: the sources to test on, a,b (--set test_sources; default every source present)")
	resume := fs.String("resume", "", "continue the interrupted run in this directory with its own settings")
	startOver := fs.Bool("start-over", false, "with --resume: start over from iteration 0 a run whose checkpoint.gob is lost although it validated or finished; its files are moved aside into DIR/stopped-TIME, never deleted")
	repair := fs.Bool("repair", false, "with --resume: go on although metrics.jsonl or val.jsonl do not match the checkpoint (damaged rows are dropped and the gap recorded in gaps.jsonl; a damaged best.gob is moved aside)")
	quiet := fs.Bool("quiet", false, "print only the final result")
	device := deviceFlag(fs)
	set, code, ok := parseArgs(fs, args, stdout, stderr, "iters", "eval-tasks", "val-every", "val-tasks", "image-size", "channels", "way", "shot", "query")
	if !ok {
		return o, code, false
	}
	o = runOpts{preset: *preset, variant: *variant, out: *out, data: *data, resume: *resume, iters: *iters, set: set,
		repair: *repair, startOver: *startOver, quiet: *quiet}
	refuse := func(err error) (runOpts, int, bool) { return o, fail(stderr, err), false }
	budget, err := minutesFlag("run", set["minutes"], *minutes)
	if err != nil {
		return refuse(err)
	}
	if o.device, err = deviceSelection("run", set, *device); err != nil {
		return refuse(err)
	}
	o.budget = budget
	if o.repair && o.resume == "" {
		return refuse(errors.New("run: --repair applies to --resume DIR only"))
	}
	if o.startOver && o.resume == "" {
		return refuse(errors.New("run: --start-over applies to --resume DIR only"))
	}
	if o.resume != "" {
		if err := checkResume(fs, set); err != nil {
			return refuse(err)
		}
		return o, 0, true
	}
	if o.preset == "" {
		return refuse(errors.New("run: --preset is required (see mkbench presets), or --resume DIR"))
	}
	if o.ov, err = overrides(fs, set, sets, "iters", "seed", "eval-tasks", "val-every", "val-tasks", "image-size", "channels", "sources", "test-sources", "way", "shot", "query", "backbone"); err != nil {
		return refuse(err)
	}
	if err := knownPresetAndVariant(o.preset, o.variant); err != nil {
		return refuse(fmt.Errorf("run: %w", err))
	}
	return o, 0, true
}

// run trains the run o names, new or resumed, then evaluates it. A run
// stopped by a signal saves a checkpoint and exits 130.
func (o runOpts) run(stdout, stderr io.Writer) int {
	// The device first: one that cannot open is refused before anything
	// is read or written.
	device, release, err := useDevice("run", o.device, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	defer release()
	var cfg engine.Config
	// moved is the note of a run resumed on another device than its
	// checkpoint's, printed as it starts rather than with the notes at
	// its end.
	var moved string
	// start is the first progress line, printed once the task data has
	// loaded: a missing data folder should not be preceded by "training…".
	var presetName, dir, family, start string
	data := o.data
	var done int
	if o.resume != "" {
		dir = o.resume
		recordedData(dir, o.set, &data)
		if _, err := os.Stat(filepath.Join(dir, engine.FileCheckpoint)); errors.Is(err, os.ErrNotExist) {
			// Stopped before its first checkpoint: the engine starts its
			// config.json over.
			rc, err := engine.ReadRunConfig(dir)
			if err != nil {
				return fail(stderr, err)
			}
			cfg, presetName, family = rc.Config, rc.Preset, rc.Source
		} else {
			ck, err := engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
			if err != nil {
				return fail(stderr, err)
			}
			cfg, presetName, family, done = ck.Config, ck.Preset, ck.Source, ck.Iter
			moved = engine.DeviceChangeNote(ck.Device, device, ck.Iter)
		}
		if o.set["iters"] {
			if o.iters < done {
				return fail(stderr, fmt.Errorf("run: --iters %d is below the %d iterations already done", o.iters, done))
			}
			cfg.Iters = o.iters
		}
		start = fmt.Sprintf("resuming %s at iteration %d of %d%s", dir, done, cfg.Iters, onDevice(device))
		if err := presets.CheckMemory(dir, family, cfg, engine.Config.MemoryEstimate, nil); err != nil {
			return fail(stderr, err) // a run moved to a smaller machine
		}
	} else {
		if err := folderChannels(o.preset, data, o.ov); err != nil {
			return fail(stderr, err)
		}
		p, c, err := presets.CheckedConfig(presets.Spec{Preset: o.preset, Variant: o.variant, Overrides: o.ov})
		if err != nil {
			return fail(stderr, err)
		}
		cfg, presetName = c, p.Name
		family = p.Source
		dir = o.out
	}

	ctx, cancel := stopContext()
	defer cancel()
	var obs engine.Observer
	if !o.quiet {
		obs = progressPrinter(stdout, o.budget, cfg)
	}
	srcs, err := presets.NewSources(family, cfg, data)
	if err != nil {
		return fail(stderr, err)
	}
	if o.resume == "" {
		// Named (and made) once the data has loaded, so a bad data folder
		// leaves no empty run directory behind.
		if dir == "" {
			if dir, err = presets.NewRunDir(presets.RunsRoot(), presetName, cfg.Variant(), cfg.Seed, time.Now()); err != nil {
				return fail(stderr, err)
			}
		}
		start = fmt.Sprintf("training %s, variant %s, seed %d, %d iterations%s → %s", presetName, cfg.Variant(), cfg.Seed, cfg.Iters, onDevice(device), dir)
	}
	if !o.quiet {
		fmt.Fprintln(stdout, start)
	}
	if moved != "" && done < cfg.Iters {
		say(stderr, "note: %s", moved)
	} else {
		moved = "" // a finished run trains nothing: the engine notes an evaluation run again
	}
	opts := engine.RunOptions{Preset: presetName, Dir: dir, Resume: o.resume != "", Repair: o.repair, StartOver: o.startOver, Val: srcs.Val, Test: srcs.Test, TestBySource: srcs.TestBy,
		Budget: o.budget, Data: data}
	res, err := engine.Run(ctx, cfg, srcs.Train, opts, obs)
	for _, n := range res.Notes {
		if n != moved {
			say(stderr, "note: %s", n)
		}
	}
	if res.AlreadyDone {
		fmt.Fprintf(stdout, "already finished: %d iterations; eval %s (summary.json unchanged)\n", res.Iters, res.Eval)
		fmt.Fprintf(stdout, "files: %s\n", dir)
		return 0
	}
	if res.Interrupted && (errors.Is(err, context.Canceled) || errors.Is(err, engine.ErrStopped)) {
		say(stderr, "interrupted at iteration %d; checkpoint saved; continue with: mkbench run --resume %s", res.Iters, dir)
		return 130
	}
	if err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "done: %d iterations in %.1fs (%.2f ms/iter); eval %s\n", res.Iters, res.TrainSeconds, res.MsPerIter, res.Eval)
	fmt.Fprintf(stdout, "files: %s\n", dir)
	return 0
}

// folderSources are the episodes of a folder of images as the model of a
// run of family reads them — its size, channels and pixel convention, and
// its family's name — for a cross-domain evaluation (eval --folder).
func folderSources(dir, split, family string, c engine.Config) (presets.Sources, error) {
	if split != "all" && split != "test" {
		return presets.Sources{}, fmt.Errorf("eval: --split %q: want all or test", split)
	}
	ch, h, w, ok := c.ImageInput()
	if !c.Classify() || !ok {
		return presets.Sources{}, fmt.Errorf("eval: --folder needs an image model (a convolutional or ResNet ψ); this is a %s run", family)
	}
	if h != w {
		return presets.Sources{}, fmt.Errorf("eval: the model takes %d×%d images; --folder reads square ones", h, w)
	}
	set, err := datasets.LoadFolder(dir, datasets.FolderOptions{ImageOptions: datasets.ImageOptions{Side: h}, SplitSeed: 1,
		Need: []datasets.FolderNeed{{Split: split, Way: c.Way, Examples: c.Shot + c.EvalQuery}}})
	if err != nil {
		return presets.Sources{}, err
	}
	cs, err := set.Split(split)
	if err != nil {
		return presets.Sources{}, fmt.Errorf("eval: %s has no %s classes (%v); use --split all", dir, split, err)
	}
	mode := datasets.PixelMode{Channels: ch, Ink: family == "omniglot", Signed: family == "metadataset"}
	conv, err := datasets.Convert(cs, mode, family)
	if err != nil {
		return presets.Sources{}, err
	}
	ep, err := datasets.NewClassEpisodes(conv, c.Way, c.Shot, c.EvalQuery)
	if err != nil {
		return presets.Sources{}, fmt.Errorf("eval: %s: %w (choose --way, --shot or --query to fit)", dir, err)
	}
	return presets.Sources{Train: ep, Test: ep}, nil
}

// folderChannels sets the channels of a folder preset's run from the
// first image of its folder, unless they were given.
func folderChannels(preset, data string, ov presets.Overrides) error {
	p, err := presets.Get(preset)
	if err != nil || p.Source != "folder" || data == "" {
		return nil // the preset's own error, or NewSources's, comes later
	}
	if _, given := ov["channels"]; given {
		return nil
	}
	n, err := datasets.FolderChannels(data)
	if err != nil {
		return err
	}
	ov["channels"] = n
	return nil
}

// stopContext is cancelled by Ctrl-C, SIGTERM and SIGHUP (a closed
// terminal, tmux kill-session, a dropped ssh), so each of them saves a
// checkpoint before the command ends. SIGHUP is left alone when it is
// ignored (nohup), so the run goes on. SIGPIPE is ignored: a progress line
// written to a closed pipe or a hung-up terminal fails quietly (EPIPE,
// EIO) instead of killing the run before it saves.
func stopContext() (context.Context, context.CancelFunc) {
	signal.Ignore(syscall.SIGPIPE)
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return signal.NotifyContext(context.Background(), sigs...)
}

// cmdTUI opens the workbench. It needs a terminal on both ends; without
// one (a pipe, a CI job) it says so and points at the headless command.
func cmdTUI(args []string, stdout, stderr io.Writer) int {
	// --runs takes an optional folder, which the flag package cannot say:
	// it is taken out of args first.
	runsDir := ""
	for i, a := range args {
		if a == "--runs" || a == "-runs" {
			runsDir = presets.RunsRoot()
			rest := args[i+1:]
			if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
				runsDir, rest = rest[0], rest[1:]
			}
			args = append(args[:i:i], rest...)
			break
		}
	}
	fs := newFlags("tui")
	preset := fs.String("preset", "", "start this preset at once (default: pick one)")
	iters := fs.Int("iters", 0, "training iterations (default: the preset's)")
	seed := fs.Int64("seed", -1, "random seed (default: the preset's)")
	minutes := fs.Float64("minutes", 0, "stop each run's training after this many minutes of training time, then evaluate (default: no limit)")
	data := fs.String("data", "", dataHelp)
	sweepDir := fs.String("sweep", "", "watch the sweep in DIR (mkbench sweep run --out DIR), wherever its units run")
	modelsDir := fs.String("models-dir", "", "the picker lists the models in this folder (mkbench models export --models-dir) instead of the shipped ones")
	sets := setFlag(fs)
	device := deviceFlag(fs)
	// Defined for the help page only: --runs was taken out of args above.
	fs.Bool("runs", false, "open the runs screen: every run under DIR (default: the runs root, ./runs or $MKBENCH_RUNS)")
	set, code, ok := parseArgs(fs, args, stdout, stderr, "iters")
	if !ok {
		return code
	}
	sel, err := deviceSelection("tui", set, *device)
	if err != nil {
		return fail(stderr, err)
	}
	// --iters and --seed are shorthands of --set iters and seed, as in run.
	ov, err := overrides(fs, set, sets, "iters", "seed")
	if err != nil {
		return fail(stderr, err)
	}
	if _, err := minutesFlag("tui", set["minutes"], *minutes); err != nil {
		return fail(stderr, err)
	}
	if err := knownPresetAndVariant(*preset, ""); err != nil {
		return fail(stderr, fmt.Errorf("tui: %w", err))
	}
	if *preset != "" {
		if _, _, err := presets.CheckedConfig(presets.Spec{Preset: *preset, Overrides: ov}); err != nil {
			return fail(stderr, err)
		}
	}
	if *sweepDir != "" {
		// Checked here, so a wrong directory is one line in the terminal
		// rather than a prompt inside the workbench.
		if *preset != "" {
			return fail(stderr, errors.New("tui: --sweep watches a sweep; it cannot start a --preset too"))
		}
		if st, err := os.Stat(*sweepDir); err != nil || !st.IsDir() {
			return fail(stderr, fmt.Errorf("tui: --sweep %s: no such directory (start a sweep with mkbench sweep run FILE --out %s)", *sweepDir, *sweepDir))
		}
		if _, err := sweep.Load(*sweepDir); err != nil {
			return fail(stderr, err)
		}
	}
	if runsDir != "" {
		if *preset != "" || *sweepDir != "" {
			return fail(stderr, errors.New("tui: --runs opens the runs screen; it cannot start a --preset or watch a --sweep too"))
		}
		if _, err := runs.Find(runsDir); err != nil {
			return fail(stderr, fmt.Errorf("tui: --runs: %w", err))
		}
	}
	if why := noTerminal(os.Stdin, stdout); why != "" {
		return fail(stderr, fmt.Errorf("the workbench needs a terminal (%s); train headless with: mkbench run --preset sine-5shot (see mkbench help)", why))
	}
	// Every model the workbench builds (its runs, experiments and
	// evaluations) runs on the device: it is the process's
	// (engine.UseDevice), and engine.DeviceLabel names it. The picker's d
	// chooses another (tuiDevices); --device preselects it.
	devices, err := newTUIDevices(sel, set["device"], stderr)
	if err != nil {
		return fail(stderr, err)
	}
	defer devices.Close()
	lib := library(*modelsDir)
	if *modelsDir != "" {
		if _, err := lib.List(); err != nil && !errors.Is(err, models.ErrDamaged) { // the picker names damaged models and offers the rest
			return fail(stderr, fmt.Errorf("tui: --models-dir: %w", err))
		}
	}
	if err := ui.Run(ui.Options{Preset: *preset, Iters: *iters, Seed: *seed, Minutes: *minutes, Data: *data, Overrides: ov, Sweep: *sweepDir, Models: &lib, Runs: runsDir, Devices: devices}, stdout); err != nil {
		return fail(stderr, err)
	}
	return 0
}

// noTerminal says why the workbench cannot open, or "" when it can.
func noTerminal(in *os.File, out io.Writer) string {
	switch {
	case os.Getenv("CI") != "":
		return "CI is set"
	case !isTerminal(out):
		return "stdout is not a terminal"
	case !isTerminal(in):
		return "stdin is not a terminal"
	}
	return ""
}

// isTerminal says whether w is a terminal. Commands write to io.Writers so
// that tests run them in-process on buffers, which are never terminals.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// minutesFlag is the training-time budget of cmd's --minutes M
// (engine.MinutesBudget's bounds); given says the flag was set, and a
// given 0, which would read as a limit, is refused as none.
func minutesFlag(cmd string, given bool, m float64) (time.Duration, error) {
	d, err := engine.MinutesBudget(m)
	if err == nil && given && d == 0 {
		err = errors.New("0 is no limit: leave --minutes out for none")
	}
	if err != nil {
		return 0, fmt.Errorf("%s: --minutes: %w", cmd, err)
	}
	return d, nil
}
