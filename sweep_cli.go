package main

import (
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
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
)

// sweepPoll is how often --wait and the local engine's summary look at
// the units.
var sweepPoll = 5 * time.Second

func cmdSweep(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		writeHelp(stdout, newFlags("sweep"))
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
	return fail(stderr, fmt.Errorf("sweep: %w", unknownError("command", sub, subcommands("sweep"), "mkbench help sweep")))
}

// sweepFlags parses a sweep command's flags; ok false means done (code).
func sweepFlags(fs *flagSet, target, what string, args []string, stdout, stderr io.Writer) (map[string]bool, int, bool) {
	set, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		writeHelp(stdout, fs)
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
	data, err := runfile.ReadBounded(path, runfile.MaxUserText)
	if err != nil {
		return sweep.File{}, nil, fmt.Errorf("sweep: cannot read the sweep file: %w", err)
	}
	f, err := sweep.ParseFile(path, data, baselineNames())
	var de *sweep.DeviceError
	if errors.As(err, &de) {
		if hint := deviceHint(de.Value); hint != "" {
			err = fmt.Errorf("%w%s", err, hint)
		}
	}
	return f, data, err
}

func cmdSweepPlan(file string, args []string, stdout, stderr io.Writer) int {
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
	// The device the units would run on: the file's, else
	// $MKBENCH_DEVICE, else the CPU (sweep run --device overrides it).
	dev := f.Device
	if dev == "" {
		sel, err := deviceSelection("sweep plan", nil, "")
		if err != nil {
			return fail(stderr, err)
		}
		dev = sel.String()
	}
	sweep.WithDevice(units, dev)
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
		fmt.Fprintf(stdout, "  %3d  %-48s %7d iters  %-8s %s\n", r.Index, r.Name, r.Iters, r.Device, est)
	}
	cores := runtime.NumCPU()
	fmt.Fprintf(stdout, "training ≈ %s one after another with both cores of the reference machine (2 cores; measured ms/iter of each preset and variant, evaluation not included)",
		formatSeconds(total))
	if unknown > 0 {
		fmt.Fprintf(stdout, "; %d units of families not measured are not counted", unknown)
	}
	fmt.Fprintf(stdout, "\nlocal engine here: %d units at a time (--jobs, default the %d cores)\n", cores, cores)
	if dev != "cpu" {
		gres := f.Slurm.Gres
		if gres == "" {
			gres = sweep.DefaultGres
		}
		fmt.Fprintf(stdout, "device %s: the backbones run there, the CPU's times above are no estimate of it; on Slurm each unit asks for --gres=%s (slurm: {gres: …} to change it)\n", dev, gres)
	}
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
func engineFlags(fs *flagSet) (engineName *string, jobs *int, wait *bool) {
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

func cmdSweepRun(file string, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sweep run")
	out := fs.String("out", "", "sweep directory (default: a new folder under ./runs or $MKBENCH_RUNS); running again on it continues it")
	engineName, jobs, wait := engineFlags(fs)
	dry := fs.Bool("dry-run", false, "slurm engine: write DIR/sweep.sbatch and submit nothing")
	data := fs.String("data", "", dataHelp+"; with slurm, a folder every node sees")
	quiet := fs.Bool("quiet", false, "print only the results")
	device := deviceFlag(fs)
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
	// A bad --device or $MKBENCH_DEVICE is refused before the file is read.
	if _, err := deviceSelection("sweep run", set, *device); err != nil {
		return fail(stderr, err)
	}
	f, source, err := readSweepFile(file)
	if err != nil {
		return fail(stderr, err)
	}
	// --device beats the file's device:, which beats $MKBENCH_DEVICE.
	dev, err := workersDevice("sweep run", set, *device, f.Device, *engineName, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	m := sweep.Manifest{File: f, Units: f.Units(), Data: runfile.AbsOrEmpty(*data), Engine: *engineName}
	sweep.WithDevice(m.Units, dev)
	if m.Binary, err = selfPath(); err != nil {
		return fail(stderr, err)
	}
	// Refused before a sweep directory is made: nothing is left behind.
	all := make([]int, len(m.Units))
	for i := range all {
		all[i] = i
	}
	if err := checkUnits(m, *engineName, all); err != nil {
		return fail(stderr, err)
	}
	dir := *out
	if dir == "" {
		stem := sweep.SafeName(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)))
		if dir, err = presets.NewSweepDir(presets.RunsRoot(), stem, time.Now()); err != nil {
			return fail(stderr, err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fail(stderr, err)
	}
	if err := sweep.Create(dir, m, source); err != nil {
		return fail(stderr, err)
	}
	// A sweep run again continues on the device asked for now.
	if err := sweep.SetDevice(dir, dev); err != nil {
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

// selfPath is this mkbench executable, for the workers.
func selfPath() (string, error) {
	if workerBinary != "" {
		return workerBinary, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("sweep: cannot find the mkbench executable for the workers: %w", err)
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p, nil
}

// workerBinary, when set, is the mkbench binary workers run instead of
// this executable: tests that run commands in-process set it, their
// executable being the test binary.
var workerBinary string

// isSweepDir reports whether dir holds a sweep (sweep.json) and no
// experiment.
func isSweepDir(dir string) bool {
	_, errS := os.Stat(filepath.Join(dir, sweep.FileManifest))
	_, errE := os.Stat(filepath.Join(dir, experiments.FileExperiment))
	return errS == nil && errE != nil
}
