package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/opencl"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/presets/models"
)

// experimentOpts are mkbench experiment's flags, parsed and checked.
type experimentOpts struct {
	name   string
	resume string // the experiment directory continued, or ""
	// opts and ov are a new experiment's options and settings; a resumed
	// one has its own.
	opts              experiments.Options
	ov                presets.Overrides
	out, data         string
	model, modelsDir  string
	engine, slurmFile string
	jobs              int
	wait, quiet       bool
	device            opencl.Selection // --device, or $MKBENCH_DEVICE
	deviceGiven       bool             // --device was given: the engine's workers get it
}

func cmdExperiment(args []string, stdout, stderr io.Writer) int {
	e, code, ok := parseExperiment(args, stdout, stderr)
	if !ok {
		return code
	}
	return e.run(stdout, stderr)
}

// parseExperiment parses experiment's flags. ok is false when the
// command is done (--help, or a refusal already printed), code being its
// exit status.
func parseExperiment(args []string, stdout, stderr io.Writer) (e experimentOpts, code int, ok bool) {
	var name string
	name, args = leadingArg(name, args)
	fs := newFlags("experiment")
	preset := fs.String("preset", "", "preset name (see mkbench presets)")
	variants := fs.String("variants", "", "comma-separated variants (rbf, rff, vrf, vrf+ctx, vrf+cnf, metakernel, maml), or all (default: the experiment's, e.g. rbf,rff,vrf,vrf+ctx,metakernel for ablation)")
	seeds := fs.String("seeds", "", "comma-separated seeds; several give the mean and spread across seeds (default: the preset's seed)")
	iters := fs.Int("iters", 0, "training iterations per run (default: the preset's)")
	bases := fs.String("bases", "", "efficiency: comma-separated numbers of bases D (default 16,...,2048); elsewhere one D replacing the preset's")
	ways := fs.String("ways", "", "versatility, classification: comma-separated ways to test (default 5,10,20,50,100)")
	shots := fs.String("shots", "", "versatility: shots to test (default 1,5,10; sine 3,5,10,20); shots: shots to train (default sine 3,5,10)")
	evalTasks := fs.Int("eval-tasks", 0, "evaluation tasks per run and per versatility cell (default: the preset's)")
	minutes := fs.Float64("minutes", 0, "training-time budget per run in minutes; a run out of time is evaluated as it stands")
	data := fs.String("data", "", dataHelp)
	out := fs.String("out", "", "experiment directory (default: a new folder under ./runs or $MKBENCH_RUNS)")
	fromRun := fs.String("run", "", "versatility: evaluate this trained run directory instead of training")
	model := fs.String("model", "", "versatility: evaluate this trained model (mkbench models lists them) instead of training")
	modelsDir := fs.String("models-dir", "", "with --model: the folder of models to read it from (default: those shipped in mkbench)")
	resume := fs.String("resume", "", "continue the interrupted experiment in this directory")
	quiet := fs.Bool("quiet", false, "print only the results")
	engineName, jobs, wait := engineFlags(fs)
	slurmFile := fs.String("slurm", "", "with --engine slurm: a YAML file whose slurm: section (a sweep file's keys: partition, time, mem, …) sets the job options")
	sets := setFlag(fs)
	device := deviceFlag(fs)
	set, code, ok := parseArgs(fs, args, stdout, stderr, "iters", "eval-tasks", "jobs")
	if !ok {
		return e, code, false
	}
	e = experimentOpts{name: name, resume: *resume, out: *out, data: *data, model: *model, modelsDir: *modelsDir,
		engine: *engineName, slurmFile: *slurmFile, jobs: *jobs, wait: *wait, quiet: *quiet}
	refuse := func(err error) (experimentOpts, int, bool) { return e, fail(stderr, err), false }
	if e.engine != "" {
		if err := checkEngine(e.engine); err != nil {
			return refuse(fmt.Errorf("experiment: %w", err))
		}
	}
	if e.slurmFile != "" && e.engine != "slurm" {
		return refuse(errors.New("experiment: --slurm FILE applies to --engine slurm"))
	}
	if _, err := minutesFlag("experiment", set["minutes"], *minutes); err != nil {
		return refuse(err)
	}
	var err error
	if e.device, err = deviceSelection("experiment", set, *device); err != nil {
		return refuse(err)
	}
	e.deviceGiven = set["device"]
	if e.resume != "" {
		if err := checkResume(fs, set); err != nil {
			return refuse(err)
		}
		return e, 0, true
	}
	if err := knownPresetAndVariant(*preset, ""); err != nil {
		return refuse(fmt.Errorf("experiment: %w", err))
	}
	if name != "" && !contains(experiments.Names, name) {
		return refuse(fmt.Errorf("experiment: %w", unknownError("experiment", name, experiments.Names, "one of "+strings.Join(experiments.Names, ", "))))
	}
	if set["variants"] && *variants != "all" {
		known := append(slices.Clone(engine.Variants), baselineNames()...)
		for _, v := range strings.Split(*variants, ",") {
			if v = strings.ToLower(strings.TrimSpace(v)); v != "" && !contains(known, v) {
				return refuse(fmt.Errorf("experiment: --variants: %w", unknownError("variant", v, known, "choose from "+strings.Join(known, ", ")+", or all")))
			}
		}
	}
	if name == "" {
		return refuse(fmt.Errorf("experiment: name the experiment (one of %s): mkbench experiment NAME --preset P, or --resume DIR", strings.Join(experiments.Names, ", ")))
	}
	// --iters and --eval-tasks are shorthands of --set iters and
	// eval_tasks; they are options too, which experiment.json records.
	if e.ov, err = overrides(fs, set, sets, "iters", "eval-tasks"); err != nil {
		return refuse(err)
	}
	if iv, ok := e.ov["iters"]; ok {
		*iters = iv.(int)
	}
	if ev, ok := e.ov["eval_tasks"]; ok {
		*evalTasks = ev.(int)
	}
	for k, f := range map[string]string{"seed": "--seeds", "bases": "--bases"} {
		if _, ok := e.ov[k]; ok {
			return refuse(fmt.Errorf("experiment: --set %s: give it as %s, the experiment's own setting", k, f))
		}
	}
	if e.model != "" && (name != experiments.Versatility || set["run"]) {
		return refuse(errors.New("experiment: --model belongs to the versatility experiment, instead of --run"))
	}
	if e.model == "" && set["models-dir"] {
		return refuse(errors.New("experiment: --models-dir applies to --model NAME"))
	}
	o := experiments.Options{Experiment: name, Preset: *preset, Iters: *iters, EvalTasks: *evalTasks, Minutes: *minutes, FromRun: *fromRun}
	if set["variants"] {
		if o.Variants, err = experiments.ParseVariants(*variants); err != nil {
			return refuse(fmt.Errorf("experiment: %w", err))
		}
	}
	if set["seeds"] {
		if o.Seeds, err = experiments.ParseSeeds(*seeds); err != nil {
			return refuse(fmt.Errorf("experiment: %w", err))
		}
	}
	for _, l := range []struct {
		flag string
		val  *string
		dst  *[]int
	}{{"bases", bases, &o.Bases}, {"ways", ways, &o.Ways}, {"shots", shots, &o.Shots}} {
		if set[l.flag] {
			if *l.dst, err = experiments.ParseInts(l.flag, *l.val); err != nil {
				return refuse(fmt.Errorf("experiment: %w", err))
			}
		}
	}
	e.opts = o
	return e, 0, true
}

// run plans the experiment e names (or resumes it), trains its runs here
// or with a sweep engine, evaluates them and draws its results.
func (e experimentOpts) run(stdout, stderr io.Writer) int {
	o, ov, dir := e.opts, e.ov, e.out
	device, release, err := useDevice("experiment", e.device, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	defer release()
	if e.deviceGiven {
		defer forwardDevice(e.device)()
	}
	if e.resume != "" {
		m, err := experiments.LoadManifest(e.resume)
		if err != nil {
			return fail(stderr, err)
		}
		if e.name != "" && e.name != m.Options.Experiment {
			return fail(stderr, fmt.Errorf("experiment: %s holds a %s experiment, not %s", e.resume, m.Options.Experiment, e.name))
		}
		o, dir, ov = m.Options, e.resume, m.Overrides
	} else if e.model != "" {
		// The model becomes an ordinary run directory beside the runs,
		// which the experiment then reads like --run's.
		lib := library(e.modelsDir)
		runDir := models.RunDir(presets.RunsRoot(), e.model)
		aside, err := lib.Materialize(e.model, runDir)
		if err != nil {
			return fail(stderr, fmt.Errorf("experiment: %w", nearestModel(lib, e.model, err)))
		}
		if aside != "" {
			say(stderr, "experiment: %s held an earlier model %s: moved to %s", runDir, e.model, aside)
		}
		o.FromRun = runDir
		if o.Preset == "" {
			rc, err := engine.ReadRunConfig(runDir)
			if err != nil {
				return fail(stderr, err)
			}
			o.Preset = rc.Preset
		}
	}
	o.Data = e.data

	r := &experiments.Runner{Dir: dir, Options: o, Overrides: ov, Baselines: experiments.DefaultBaselines()}
	if _, err := r.Plan(); err != nil {
		return fail(stderr, err)
	}
	if r.Dir == "" {
		// Named (and made) once the plan holds, so a bad flag leaves no
		// empty directory behind.
		if r.Dir, err = presets.NewExperimentDir(presets.RunsRoot(), e.name, o.Preset, time.Now()); err != nil {
			return fail(stderr, err)
		}
		dir = r.Dir
	}
	if e.resume == "" && o.FromRun == "" {
		// The largest run of the plan must fit: the preset's variant with
		// the overrides and the largest D.
		mem := ov.With("iters", max(o.Iters, 1))
		if len(o.Bases) > 0 {
			mem["bases"] = slices.Max(o.Bases)
		}
		if o.Experiment == "shots" && len(o.Shots) > 0 {
			mem["shot"] = slices.Max(o.Shots)
		}
		if _, _, err := presets.CheckedConfig(presets.Spec{Preset: o.Preset, Overrides: mem}); err != nil {
			return fail(stderr, fmt.Errorf("experiment: %w", err))
		}
	}
	if !e.quiet {
		budget, _ := engine.MinutesBudget(o.Minutes) // checked above, or recorded by the experiment
		r.Progress = progressLines(stdout, budget)
		fmt.Fprintf(stdout, "experiment %s, preset %s%s → %s\n", o.Experiment, o.Preset, onDevice(device), dir)
	}
	// The experiment is a sweep underneath: its training runs are units
	// of a sweep in its directory, so sweep status, cancel and resume,
	// and the workbench's sweep screen, work on it. With --engine they go
	// to that engine first; the Runner then finds them finished and
	// evaluates and draws as always. Without, the Runner trains them here
	// one after another.
	if code, ok := experimentSweep(r, e.engine, e.slurmFile, e.device.String(), e.deviceGiven, stderr); !ok {
		return code
	}
	if e.engine != "" {
		code, through := runUnits(r.Dir, e.engine, e.jobs, e.wait, false, e.quiet, nil, stdout, stderr)
		if !through {
			if code == 0 {
				fmt.Fprintf(stdout, "when the runs are through, draw the results with: mkbench experiment --resume %s\n", dir)
			}
			return code
		}
	}
	ctx, cancel := stopContext()
	defer cancel()
	res, err := r.Run(ctx)
	if err != nil && errors.Is(err, context.Canceled) {
		say(stderr, "experiment interrupted; finished runs and checkpoints are kept; continue with: mkbench experiment --resume %s", dir)
		return 130
	}
	if err != nil {
		// Failed runs leave the others' results: show them, then the error.
		if res != nil && errors.Is(err, experiments.ErrRunsFailed) {
			printResults(stdout, dir, res)
		}
		return fail(stderr, err)
	}
	printResults(stdout, dir, res)
	return 0
}

// progressLines prints a line when a run starts and ends, and a progress
// line at most every two seconds while it trains, its ETA bounded by each
// run's budget. The Runner calls it on the goroutine that called Run.
func progressLines(w io.Writer, budget time.Duration) func(experiments.Progress) {
	return func(p experiments.Progress) {
		at := fmt.Sprintf("[%d/%d] %s", p.Job, p.Jobs, p.Name)
		switch p.Phase {
		case experiments.PhaseReuse:
			fmt.Fprintf(w, "%s: finished earlier, reusing it\n", at)
		case experiments.PhaseModel:
			fmt.Fprintf(w, "%s: evaluating this run's model\n", at)
		case experiments.PhaseResume:
			fmt.Fprintf(w, "%s: resuming from its checkpoint\n", at)
		case experiments.PhaseTrain:
			fmt.Fprintf(w, "%s: training\n", at)
		case experiments.PhaseStep:
			s := p.Snapshot
			fmt.Fprintf(w, "%s: iter %d/%d  loss %.4f  kl %.3f  %s  eta %s\n", at, s.Iter, s.Iters, s.Loss, s.KL, engine.FormatRate(s.ItersPerSec), engine.FormatETA(trainETA(*s, budget)))
		case experiments.PhaseEval:
			fmt.Fprintf(w, "%s: evaluating at %s\n", at, p.Key.Setting())
		case experiments.PhaseDone:
			r := p.Result
			metric := "mse"
			v, ci := fmt.Sprintf("%.4f", r.Mean), fmt.Sprintf("%.4f", r.CI95)
			if p.Key.Way > 0 {
				metric, v, ci = "accuracy", fmt.Sprintf("%.2f%%", 100*r.Mean), fmt.Sprintf("%.2f", 100*r.CI95)
			}
			if p.Key.Shot != p.Key.TrainShot || p.Key.Way != p.Key.TrainWay {
				fmt.Fprintf(w, "%s at %s: %s %s ± %s (%d tasks)\n", at, p.Key.Setting(), metric, v, ci, r.Tasks)
				return
			}
			fmt.Fprintf(w, "%s: %s %s ± %s (%d tasks; trained %d iterations in %.1fs, %.2f ms/iter)\n", at, metric, v, ci, r.Tasks, r.Iters, r.TrainSeconds, r.MsPerIter)
		case experiments.PhaseFailed:
			fmt.Fprintf(w, "%s: failed: %v\n", at, p.Err)
		case experiments.PhaseFigures:
			fmt.Fprintln(w, "drawing the tables and figures")
		}
	}
}

// printResults prints the experiment's main table (results.md up to its
// list of every point) and where the files are.
func printResults(w io.Writer, dir string, res *experiments.Results) {
	md, err := runfile.ReadBounded(filepath.Join(dir, experiments.FileMarkdown), runfile.MaxUserText)
	if err == nil {
		if i := bytes.Index(md, []byte("## All points")); i > 0 {
			md = md[:i]
		}
		fmt.Fprintf(w, "\n%s", md)
	}
	fmt.Fprintf(w, "files: %s (%s, %s, %s", dir, experiments.FileResults, experiments.FileCSV, experiments.FileMarkdown)
	if len(res.Figures) > 0 {
		fmt.Fprintf(w, ", %d figures in %s/", len(res.Figures), experiments.DirFigures)
	}
	fmt.Fprintln(w, ")")
}

func cmdReport(args []string, stdout, stderr io.Writer) int {
	var dir string
	dir, args = leadingArg(dir, args)
	fs := newFlags("report")
	if _, code, ok := parseArgs(fs, args, stdout, stderr); !ok {
		return code
	}
	if dir == "" {
		return fail(stderr, errors.New("report: name the experiment directory: mkbench report DIR"))
	}
	if _, err := os.Stat(filepath.Join(dir, engine.FileSummary)); err == nil {
		return fail(stderr, fmt.Errorf("report: %s is a run directory, not an experiment; evaluate it with: mkbench eval --run %s", dir, dir))
	}
	if isSweepDir(dir) {
		return sweepReport(dir, false, stdout, stderr, 0)
	}
	res, err := experiments.Report(dir)
	if err != nil {
		return fail(stderr, err)
	}
	printResults(stdout, dir, res)
	return 0
}

// experimentSweep writes the sweep manifest of r's experiment: its
// training runs as units, for engineName ("" is local). A versatility
// experiment of a given --run has none and gets no manifest.
func experimentSweep(r *experiments.Runner, engineName, slurmFile, device string, deviceGiven bool, stderr io.Writer) (int, bool) {
	runs, err := r.TrainingRuns()
	if err != nil {
		return fail(stderr, err), false
	}
	if len(runs) == 0 {
		return 0, true
	}
	if err := r.Prepare(); err != nil {
		return fail(stderr, err), false
	}
	if engineName == "" {
		engineName = "local"
	}
	m := sweep.Manifest{File: sweep.File{Presets: []string{r.Options.Preset}}, Units: sweep.ExperimentUnits(runs),
		Data: runfile.AbsOrEmpty(r.Options.Data), Engine: engineName, Experiment: r.Options.Experiment}
	// The units record the device, as a sweep's do, so that its workers
	// run there and, on Slurm, ask for a GPU; a resume keeps the recorded
	// one unless --device names another.
	sweep.WithDevice(m.Units, device)
	if slurmFile != "" {
		data, err := runfile.ReadBounded(slurmFile, runfile.MaxUserText)
		if err != nil {
			return fail(stderr, fmt.Errorf("experiment: --slurm: %w", err)), false
		}
		if m.File.Slurm, err = sweep.ParseSlurm(slurmFile, data); err != nil {
			return fail(stderr, err), false
		}
	}
	if m.Binary, err = selfPath(); err != nil {
		return fail(stderr, err), false
	}
	if r.Dir, err = filepath.Abs(r.Dir); err != nil {
		return fail(stderr, err), false
	}
	if err := sweep.Create(r.Dir, m, nil); err != nil {
		return fail(stderr, err), false
	}
	if deviceGiven {
		if err := sweep.SetDevice(r.Dir, device); err != nil {
			return fail(stderr, err), false
		}
	}
	return 0, true
}
