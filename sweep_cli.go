package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/presets"
)

const sweepUsage = `Usage:
  mkbench sweep plan FILE [--json]       list the units and their estimated cost; runs nothing
  mkbench sweep run FILE [--out DIR] [--engine local|slurm] [--jobs K] [--wait] [--dry-run] [--data DIR]
  mkbench sweep status DIR [--json]      units done / running / pending / failed, with Slurm's states
  mkbench sweep resume DIR [--engine local|slurm] [--jobs K] [--wait]
                                         run the unfinished and failed units again
  mkbench sweep cancel DIR               stop every unit (each saves a checkpoint first)
  mkbench sweep work DIR --index I       run one unit (what each Slurm array task runs)
  mkbench report DIR                     results.json/csv/md and figures of what has finished

A sweep file (YAML) names presets, variants, seeds, iters or minutes, eval_tasks, a grid of
settings (every combination) and slurm options; see the README's Sweeps section.
The local engine runs K units at a time here (default: one per core). The slurm engine
submits a job array; the mkbench binary, the sweep directory and the data must be on
storage every node sees.
`

// sweepPoll is how often --wait and the local engine's summary look at
// the units.
var sweepPoll = 5 * time.Second

func cmdSweep(args []string, stdout, stderr *os.File) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, sweepUsage)
		return 0
	}
	sub, args := args[0], args[1:]
	var target string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		target, args = args[0], args[1:]
	}
	switch sub {
	case "plan":
		return cmdSweepPlan(target, args, stdout, stderr)
	case "run":
		return cmdSweepRun(target, args, stdout, stderr)
	case "status":
		return cmdSweepStatus(target, args, stdout, stderr)
	case "resume":
		return cmdSweepResume(target, args, stdout, stderr)
	case "cancel":
		return cmdSweepCancel(target, args, stdout, stderr)
	case "work":
		return cmdSweepWork(target, args, stdout, stderr)
	}
	return fail(stderr, fmt.Errorf("sweep: unknown command %q (plan, run, status, resume, cancel, work; see mkbench sweep help)", sub))
}

// sweepFlags parses a sweep command's flags; ok false means done (code).
func sweepFlags(fs *flag.FlagSet, target, what string, args []string, stdout, stderr *os.File) (map[string]bool, int, bool) {
	set, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, sweepUsage)
		flagHelp(fs, stdout)
		return nil, 0, false
	}
	if err == nil && target == "" {
		err = fmt.Errorf("%s: name the %s: mkbench %s %s", fs.Name(), what, fs.Name(), strings.ToUpper(strings.Fields(what)[len(strings.Fields(what))-1]))
	}
	if err != nil {
		return nil, fail(stderr, err), false
	}
	return set, 0, true
}

// baselineNames are the variants besides the engine's a sweep may name.
func baselineNames() []string {
	var out []string
	for n := range experiments.DefaultBaselines() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// readSweepFile reads and checks a sweep file.
func readSweepFile(path string) (sweep.File, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return sweep.File{}, nil, fmt.Errorf("sweep: cannot read the sweep file: %w", err)
	}
	f, err := sweep.ParseFile(path, data, baselineNames())
	return f, data, err
}

func cmdSweepPlan(file string, args []string, stdout, stderr *os.File) int {
	fs := newFlags("sweep plan")
	asJSON := fs.Bool("json", false, "print the units as JSON")
	if _, code, ok := sweepFlags(fs, file, "sweep file FILE", args, stdout, stderr); !ok {
		return code
	}
	f, _, err := readSweepFile(file)
	if err != nil {
		return fail(stderr, err)
	}
	units := f.Units()
	type planned struct {
		sweep.Unit
		Iters     int     `json:"iters"`
		EstSecond float64 `json:"est_seconds,omitempty"` // 0: not measured
	}
	var rows []planned
	var total float64
	unknown := 0
	same := map[string]string{} // a unit's config → the first unit with it
	var repeats []string
	for _, u := range units {
		r := planned{Unit: u}
		p, cfg, err := u.Spec().Config()
		if err == nil {
			eff := cfg
			if eff.Variant() == "rbf" {
				eff.Bases = 0 // the RBF kernel draws no random features
			}
			key, _ := json.Marshal(struct {
				P, V string
				C    any
			}{u.RecordedPreset(), u.Variant, eff})
			if first, ok := same[string(key)]; ok {
				repeats = append(repeats, u.Name+" = "+first)
			} else {
				same[string(key)] = u.Name
			}
			r.Iters = cfg.Iters
			if ms, ok := presets.MsPerIter(p.Source, cfg); ok {
				r.EstSecond = ms * float64(cfg.Iters) / 1000
				if u.Minutes > 0 {
					r.EstSecond = min(r.EstSecond, 60*u.Minutes)
				}
			}
		}
		if r.EstSecond == 0 {
			unknown++
		}
		total += r.EstSecond
		rows = append(rows, r)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "%d units (%d presets × %d variants × %d grid points × %d seeds)\n", len(units), len(f.Presets),
		max(len(f.Variants), 1), gridPoints(f), max(len(f.Seeds), 1))
	for _, r := range rows {
		est := "not measured"
		if r.EstSecond > 0 {
			est = "≈ " + formatSeconds(r.EstSecond)
		}
		fmt.Fprintf(stdout, "  %3d  %-48s %7d iters  %s\n", r.Index, r.Name, r.Iters, est)
	}
	cores := runtime.NumCPU()
	fmt.Fprintf(stdout, "training ≈ %s one after another with both cores of the reference machine (2 cores; measured ms/iter of each preset and variant, evaluation not included)",
		formatSeconds(total))
	if unknown > 0 {
		fmt.Fprintf(stdout, "; %d units of families not measured are not counted", unknown)
	}
	fmt.Fprintf(stdout, "\nlocal engine here: %d units at a time (--jobs, default the %d cores)\n", cores, cores)
	if len(repeats) > 0 {
		fmt.Fprintf(stdout, "note: %d units train exactly the run of another (a variant that ignores a grid setting, as rbf ignores bases): %s\n",
			len(repeats), strings.Join(repeats, "; "))
	}
	return 0
}

func gridPoints(f sweep.File) int {
	n := 1
	for _, ax := range f.Grid {
		n *= len(ax.Values)
	}
	return n
}

func formatSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// engineFlags adds --engine, --jobs and --wait.
func engineFlags(fs *flag.FlagSet) (engineName *string, jobs *int, wait *bool) {
	engineName = fs.String("engine", "", "local (K units at a time on this machine) or slurm (a job array submitted with sbatch) (default local; resume: the sweep's)")
	jobs = fs.Int("jobs", 0, "local engine: units at a time (default: the number of cores); each gets cores/K threads")
	wait = fs.Bool("wait", false, "slurm engine: follow the units until all are done (exit 0) or some failed (exit 1)")
	return
}

func checkEngine(name string) error {
	if name != "local" && name != "slurm" {
		return fmt.Errorf("--engine %q: want local or slurm", name)
	}
	return nil
}

func cmdSweepRun(file string, args []string, stdout, stderr *os.File) int {
	fs := newFlags("sweep run")
	out := fs.String("out", "", "sweep directory (default: a new folder under ./runs or $MKBENCH_RUNS); running again on it continues it")
	engineName, jobs, wait := engineFlags(fs)
	dry := fs.Bool("dry-run", false, "slurm engine: write DIR/sweep.sbatch and submit nothing")
	data := fs.String("data", "", dataHelp+"; with slurm, a folder every node sees")
	quiet := fs.Bool("quiet", false, "print only the results")
	set, code, ok := sweepFlags(fs, file, "sweep file FILE", args, stdout, stderr)
	if !ok {
		return code
	}
	if *engineName == "" {
		*engineName = "local"
	}
	if err := checkEngine(*engineName); err != nil {
		return fail(stderr, fmt.Errorf("sweep run: %w", err))
	}
	if err := checkPositive(fs, set, "jobs"); err != nil {
		return fail(stderr, err)
	}
	if *dry && *engineName != "slurm" {
		return fail(stderr, errors.New("sweep run: --dry-run applies to --engine slurm (it writes the job script); see the units with mkbench sweep plan FILE"))
	}
	f, source, err := readSweepFile(file)
	if err != nil {
		return fail(stderr, err)
	}
	dir := *out
	if dir == "" {
		stem := sweep.SafeName(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)))
		if dir, err = presets.NewSweepDir(presets.RunsRoot(), stem, time.Now()); err != nil {
			return fail(stderr, err)
		}
	}
	m := sweep.Manifest{File: f, Units: f.Units(), Data: absOrEmpty(*data), Engine: *engineName}
	if m.Binary, err = selfPath(); err != nil {
		return fail(stderr, err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fail(stderr, err)
	}
	if err := sweep.Create(dir, m, source); err != nil {
		return fail(stderr, err)
	}
	if !*quiet {
		fmt.Fprintf(stdout, "sweep %s: %d units → %s\n", file, len(m.Units), dir)
	}
	code, through := runUnits(dir, *engineName, *jobs, *wait, *dry, *quiet, nil, stdout, stderr)
	if !through {
		return code
	}
	return sweepReport(dir, *quiet, stdout, stderr, code)
}

// absOrEmpty is p made absolute, so a worker in another directory (a
// Slurm task) finds it; "" stays "".
func absOrEmpty(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// selfPath is this mkbench executable, for the workers.
func selfPath() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("sweep: cannot find the mkbench executable for the workers: %w", err)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p, nil
}

// runUnits runs the sweep's units that are not finished with an engine.
// only, when set, limits them to those indices. through says the units
// are through (run by the local engine, or followed with --wait to their
// end), so the caller draws the results; code is the exit status so far.
func runUnits(dir, engineName string, jobs int, wait, dry, quiet bool, only []int, stdout, stderr *os.File) (code int, through bool) {
	st, err := sweep.ReadStatus(dir)
	if err != nil {
		return fail(stderr, err), false
	}
	var todo []int
	for _, u := range st.Units {
		if u.State == sweep.StateDone || only != nil && !slices.Contains(only, u.Index) {
			continue
		}
		if u.State == sweep.StateRunning {
			fmt.Fprintf(stderr, "mkbench: note: %s is running (pid %d on %s); it is left to that worker\n", u.Name, u.Owner.PID, u.Owner.Host)
			continue
		}
		todo = append(todo, u.Index)
	}
	ctx, cancel := stopContext()
	defer cancel()
	if len(todo) == 0 && !dry {
		if !quiet {
			fmt.Fprintln(stdout, "every unit is finished or running elsewhere")
		}
		if engineName == "slurm" && wait {
			// Still followed: units of an earlier submission may be queued.
			return followSlurm(ctx, dir, quiet, stdout, stderr)
		}
		return 0, true
	}
	if engineName == "slurm" {
		return runSlurm(ctx, dir, todo, wait, dry, quiet, stdout, stderr)
	}
	m, _ := sweep.Load(dir)
	l := &sweep.Local{Dir: dir, Binary: m.Binary, Jobs: jobs}
	if !quiet {
		l.Event = func(e sweep.LocalEvent) {
			switch {
			case !e.Done:
				fmt.Fprintf(stdout, "%s: started (log %s)\n", e.Unit.Name, e.Log)
			case e.Err != nil:
				fmt.Fprintf(stdout, "%s: not finished after %s: %v\n", e.Unit.Name, e.Elapsed.Round(time.Second), e.Err)
			default:
				fmt.Fprintf(stdout, "%s: done in %s\n", e.Unit.Name, e.Elapsed.Round(time.Second))
			}
		}
	}
	if !quiet {
		fmt.Fprintf(stdout, "local engine: %d units, %d at a time\n", len(todo), max(min(jobsOrCores(jobs), len(todo)), 1))
	}
	unfinished, err := l.Run(ctx, todo)
	if errors.Is(err, sweep.ErrInterrupted) {
		fmt.Fprintf(stderr, "mkbench: sweep interrupted; units saved checkpoints; continue with: mkbench sweep resume %s\n", dir)
		return 130, false
	}
	if err != nil {
		return fail(stderr, err), false
	}
	if len(unfinished) > 0 {
		why := "failed or were stopped"
		if st, err := sweep.ReadStatus(dir); err == nil && st.Cancelled {
			why = "were cancelled"
		}
		fmt.Fprintf(stderr, "mkbench: %d of %d units %s (see mkbench sweep status %s; continue with mkbench sweep resume %s)\n", len(unfinished), len(todo), why, dir, dir)
		return 1, true
	}
	return 0, true
}

func jobsOrCores(jobs int) int {
	if jobs > 0 {
		return jobs
	}
	return runtime.NumCPU()
}

// runSlurm submits the units (or with dry only writes the script) and
// with wait follows them (see runUnits).
func runSlurm(ctx context.Context, dir string, todo []int, wait, dry, quiet bool, stdout, stderr *os.File) (int, bool) {
	if dry {
		m, err := sweep.Load(dir)
		if err != nil {
			return fail(stderr, err), false
		}
		path, err := sweep.WriteScript(m, dir, todo)
		if err != nil {
			return fail(stderr, err), false
		}
		fmt.Fprintf(stdout, "wrote %s (%d array tasks); nothing submitted. Submit with: mkbench sweep resume %s --engine slurm\n", path, len(todo), dir)
		return 0, false
	}
	sub, err := sweep.Submit(ctx, dir, todo)
	if err != nil {
		return fail(stderr, err), false
	}
	if !quiet {
		fmt.Fprintf(stdout, "submitted job array %s (%d tasks; script %s)\n", sub.Job, len(todo), filepath.Join(dir, sweep.FileScript))
	}
	if !wait {
		fmt.Fprintf(stdout, "follow it with: mkbench sweep status %s (or mkbench tui --sweep %s); results: mkbench report %s\n", dir, dir, dir)
		return 0, false
	}
	return followSlurm(ctx, dir, quiet, stdout, stderr)
}

// followSlurm follows a submitted sweep to its end (see runUnits).
func followSlurm(ctx context.Context, dir string, quiet bool, stdout, stderr *os.File) (int, bool) {
	st, err := follow(ctx, dir, quiet, stdout)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "mkbench: stopped waiting; the sweep's Slurm jobs go on (cancel them with mkbench sweep cancel %s)\n", dir)
		return 130, false
	}
	if err != nil {
		return fail(stderr, err), false
	}
	if n := len(st.Units) - st.Counts[sweep.StateDone] - st.Counts[sweep.StateFailed]; n > 0 {
		fmt.Fprintf(stderr, "mkbench: %d of %d units stopped without finishing (Slurm no longer holds them; see mkbench sweep status %s; run them again with mkbench sweep resume %s)\n", n, len(st.Units), dir, dir)
		return 1, true
	}
	return 0, true
}

// follow waits until every unit is done or failed, or no longer held by
// Slurm, printing each unit's change of state.
func follow(ctx context.Context, dir string, quiet bool, w io.Writer) (sweep.Status, error) {
	last := map[string]string{}
	for {
		st, err := sweep.ReadStatus(dir)
		if err != nil {
			return st, err
		}
		sweep.AddQueue(ctx, &st)
		queued := 0
		for _, u := range st.Units {
			state := u.State
			if u.Queued {
				queued++
				if u.State != sweep.StateDone {
					state = fmt.Sprintf("%s (slurm %s %s)", u.State, u.Slurm, u.Node)
				}
			}
			if !quiet && last[u.Name] != state {
				fmt.Fprintf(w, "%s  %s: %s\n", time.Now().Format("15:04:05"), u.Name, strings.TrimSpace(state))
			}
			last[u.Name] = state
		}
		if st.SlurmError == "" && (st.Finished() || queued == 0) && st.Counts[sweep.StateRunning] == 0 {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(sweepPoll):
		}
	}
}

// sweepReport writes and prints the sweep's results; the exit status is
// code, or 1 when units failed.
func sweepReport(dir string, quiet bool, stdout, stderr *os.File, code int) int {
	res, err := sweep.Report(dir)
	if err != nil {
		return fail(stderr, err)
	}
	printSweepResults(stdout, dir, res)
	if res.Failed > 0 {
		return fail(stderr, fmt.Errorf("sweep: %d of %d units failed (see mkbench sweep status %s; after fixing the cause: mkbench sweep resume %s)", res.Failed, res.Units, dir, dir))
	}
	return code
}

func printSweepResults(w io.Writer, dir string, res *sweep.Results) {
	fmt.Fprintf(w, "\n%s", res.Markdown())
	fmt.Fprintf(w, "files: %s (%s, %s, %s", dir, experiments.FileResults, experiments.FileCSV, experiments.FileMarkdown)
	if len(res.Figures) > 0 {
		fmt.Fprintf(w, ", %d figures in %s/", len(res.Figures), experiments.DirFigures)
	}
	fmt.Fprintln(w, ")")
}

func cmdSweepStatus(dir string, args []string, stdout, stderr *os.File) int {
	fs := newFlags("sweep status")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if _, code, ok := sweepFlags(fs, dir, "sweep directory DIR", args, stdout, stderr); !ok {
		return code
	}
	st, err := sweep.ReadStatus(dir)
	if err != nil {
		return fail(stderr, err)
	}
	sweep.AddQueue(context.Background(), &st)
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	fmt.Fprintf(stdout, "%s: %d units: %d done, %d running, %d pending, %d failed", dir, len(st.Units),
		st.Counts[sweep.StateDone], st.Counts[sweep.StateRunning], st.Counts[sweep.StatePending], st.Counts[sweep.StateFailed])
	if st.Cancelled {
		fmt.Fprint(stdout, " (cancelled)")
	}
	fmt.Fprintln(stdout)
	for _, j := range st.Jobs {
		fmt.Fprintf(stdout, "slurm job %s: %d tasks, submitted %s\n", j.Job, len(j.Indices), j.Time.Local().Format("2006-01-02 15:04:05"))
	}
	if st.SlurmError != "" {
		fmt.Fprintf(stdout, "slurm: %s\n", st.SlurmError)
	}
	for _, u := range st.Units {
		fmt.Fprintf(stdout, "  %3d  %-44s %-8s %s\n", u.Index, u.Name, u.State, unitDetail(u))
	}
	return 0
}

// unitDetail is a status line's detail: progress and latest metric, the
// result when done, the error when failed, the owner and Slurm's state.
func unitDetail(u sweep.UnitStatus) string {
	var parts []string
	switch {
	case u.State == sweep.StateDone && u.Eval != nil:
		parts = append(parts, fmt.Sprintf("%d iters, %s", u.Iters, u.Eval))
	case u.Iters > 0:
		parts = append(parts, fmt.Sprintf("iter %d/%d", u.Iter, u.Iters))
	}
	if u.State != sweep.StateDone && u.Loss != nil {
		parts = append(parts, fmt.Sprintf("loss %.4f", *u.Loss))
	}
	if u.State != sweep.StateDone && u.Val != nil {
		parts = append(parts, fmt.Sprintf("val %.2f%%", 100**u.Val))
	}
	if u.Owner != nil {
		o := fmt.Sprintf("pid %d on %s", u.Owner.PID, u.Owner.Host)
		if u.Owner.Job != "" {
			o += ", job " + u.Owner.Job
		}
		parts = append(parts, o)
	}
	if u.Slurm != "" {
		parts = append(parts, "slurm "+strings.TrimSpace(u.Slurm+" "+u.Node))
	}
	if u.Error != "" {
		parts = append(parts, "error: "+u.Error)
	}
	return strings.Join(parts, "  ")
}

func cmdSweepResume(dir string, args []string, stdout, stderr *os.File) int {
	fs := newFlags("sweep resume")
	engineName, jobs, wait := engineFlags(fs)
	quiet := fs.Bool("quiet", false, "print only the results")
	set, code, ok := sweepFlags(fs, dir, "sweep directory DIR", args, stdout, stderr)
	if !ok {
		return code
	}
	if err := checkPositive(fs, set, "jobs"); err != nil {
		return fail(stderr, err)
	}
	m, err := sweep.Load(dir)
	if err != nil {
		return fail(stderr, err)
	}
	if *engineName == "" {
		*engineName = m.Engine
	}
	if err := checkEngine(*engineName); err != nil {
		return fail(stderr, fmt.Errorf("sweep resume: %w", err))
	}
	st, err := sweep.ReadStatus(dir)
	if err != nil {
		return fail(stderr, err)
	}
	var only []int
	if *engineName == "slurm" {
		// Units Slurm still holds are not submitted twice.
		sweep.AddQueue(context.Background(), &st)
		if st.SlurmError != "" {
			return fail(stderr, fmt.Errorf("sweep resume: cannot ask Slurm which units it still holds: %s", st.SlurmError))
		}
	}
	cleared := 0
	for _, u := range st.Units {
		if u.Queued && u.State != sweep.StateDone {
			fmt.Fprintf(stderr, "mkbench: note: %s is still in Slurm's queue (%s); not submitted again\n", u.Name, u.Slurm)
			continue
		}
		if u.State == sweep.StateFailed {
			if err := os.Remove(filepath.Join(dir, u.Dir, sweep.FileFailed)); err != nil {
				return fail(stderr, err)
			}
			cleared++
		}
		only = append(only, u.Index)
	}
	if err := sweep.Uncancel(dir); err != nil {
		return fail(stderr, err)
	}
	if !*quiet && cleared > 0 {
		fmt.Fprintf(stdout, "%d failed units are tried again\n", cleared)
	}
	if only == nil {
		only = []int{}
	}
	code, through := runUnits(dir, *engineName, *jobs, *wait, false, *quiet, only, stdout, stderr)
	if !through {
		return code
	}
	if m.Experiment != "" {
		fmt.Fprintf(stdout, "the experiment's runs are through; draw its results with: mkbench experiment --resume %s\n", dir)
		return code
	}
	return sweepReport(dir, *quiet, stdout, stderr, code)
}

func cmdSweepCancel(dir string, args []string, stdout, stderr *os.File) int {
	fs := newFlags("sweep cancel")
	if _, code, ok := sweepFlags(fs, dir, "sweep directory DIR", args, stdout, stderr); !ok {
		return code
	}
	jobs, stopped, err := sweep.CancelAll(context.Background(), dir)
	for _, j := range jobs {
		fmt.Fprintf(stdout, "cancelled slurm job %s\n", j)
	}
	for _, s := range stopped {
		fmt.Fprintf(stdout, "stopped %s\n", s)
	}
	if err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "units save a checkpoint as they stop; continue with: mkbench sweep resume %s\n", dir)
	return 0
}

func cmdSweepWork(dir string, args []string, stdout, stderr *os.File) int {
	fs := newFlags("sweep work")
	index := fs.Int("index", -1, "the unit's index ($SLURM_ARRAY_TASK_ID)")
	lockWait := fs.Duration("lock-wait", 10*time.Minute, "how long to wait for a unit another live worker holds")
	set, code, ok := sweepFlags(fs, dir, "sweep directory DIR", args, stdout, stderr)
	if !ok {
		return code
	}
	if !set["index"] || *index < 0 {
		return fail(stderr, errors.New("sweep work: --index I (≥ 0) is required"))
	}
	ctx, cancel := stopContext()
	defer cancel()
	w := &sweep.Worker{Dir: dir, LockWait: *lockWait, Log: stdout, Baselines: map[string]sweep.BaselineFunc{}}
	for name, bf := range experiments.DefaultBaselines() {
		w.Baselines[name] = func(ctx context.Context, m sweep.Manifest, u sweep.Unit, unitDir string) error {
			return experiments.TrainBaseline(ctx, u.TrainingRun(), bf, unitDir, m.Data)
		}
	}
	err := w.Work(ctx, *index)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, sweep.ErrInterrupted):
		fmt.Fprintf(stderr, "mkbench: %v\n", err)
		if ok, rerr := sweep.RequeueSelf(context.Background(), dir); rerr != nil {
			fmt.Fprintf(stderr, "mkbench: could not requeue the job for its time limit: %v\n", rerr)
		} else if ok {
			fmt.Fprintln(stderr, "mkbench: its time limit is near: requeued the job; it continues from the checkpoint")
		}
		return 130
	case errors.Is(err, sweep.ErrCancelled):
		fmt.Fprintf(stderr, "mkbench: %v\n", err)
		return 3
	}
	return fail(stderr, err)
}

// isSweepDir reports whether dir holds a sweep (sweep.json) and no
// experiment.
func isSweepDir(dir string) bool {
	_, errS := os.Stat(filepath.Join(dir, sweep.FileManifest))
	_, errE := os.Stat(filepath.Join(dir, experiments.FileExperiment))
	return errS == nil && errE != nil
}
