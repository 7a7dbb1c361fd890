package main

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/tbevents"
	"github.com/mkbench/mkbench/presets"
)

const exportForm = "mkbench export DIR --tensorboard [--force] [--data DIR2] | mkbench export DIR --format csv|json [--out FILE [--force]]"

// cmdExport writes the logs of a run, or of every run of a sweep or an
// experiment, in a format other tools read: TensorBoard event files in
// each run's directory (--tensorboard), or one tidy table of every
// metric (--format).
func cmdExport(args []string, stdout, stderr io.Writer) int {
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	fs := newFlags("export")
	tb := fs.Bool("tensorboard", false, "write TensorBoard event files (events.out.tfevents.*) into each run's directory, from its metrics.jsonl and val.jsonl, with ω histograms from its checkpoints when its data can be read")
	force := fs.Bool("force", false, "with --tensorboard: replace the event files a run already has (else such a run is left as it is); with --out: replace the file there")
	data := fs.String("data", "", "with --tensorboard: the folder of the runs' data set, for the ω histograms (default: the folder each run recorded)")
	format := fs.String("format", "", "csv or json: every run's metrics as one table with the columns run, iter, metric, value")
	out := fs.String("out", "", "with --format: write the table to this file (default: standard output)")
	set, code, ok := parseArgs(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case dir == "":
		return fail(stderr, fmt.Errorf("export: name the directory first: %s", exportForm))
	case *tb && set["format"]:
		return fail(stderr, errors.New("export: give --tensorboard or --format, not both (run export twice for both)"))
	case !*tb && !set["format"]:
		return fail(stderr, errors.New("export: say what to write: --tensorboard (event files in each run's directory) or --format csv|json (one table)"))
	case set["format"] && *format != "csv" && *format != "json":
		return fail(stderr, fmt.Errorf("export: --format %q: want csv or json", *format))
	case set["out"] && !set["format"]:
		return fail(stderr, errors.New("export: --out goes with --format (event files are written into each run's own directory)"))
	case set["data"] && !*tb:
		return fail(stderr, errors.New("export: --data goes with --tensorboard"))
	case *force && !*tb && !set["out"]:
		return fail(stderr, errors.New("export: --force goes with --tensorboard or --out"))
	}
	if set["out"] {
		if err := checkOut(*out, *force); err != nil {
			return fail(stderr, err)
		}
	}
	list, err := exportRuns(dir)
	if err != nil {
		return fail(stderr, err)
	}
	if *tb {
		return exportTensorBoard(list, *force, *data, set["data"], stdout, stderr)
	}
	note := func(n string) { say(stderr, "note: %s", n) }
	if *out == "" {
		w := bufio.NewWriter(stdout)
		if err := writeTidy(w, list, *format, note); err != nil {
			return fail(stderr, err)
		}
		if err := w.Flush(); err != nil {
			return fail(stderr, fmt.Errorf("export: %w", err))
		}
		return 0
	}
	// Written whole, and without --force only where nothing is by then:
	// of two exports to one file, the second is refused, not interleaved.
	write := runfile.WriteNewFunc
	if *force {
		write = runfile.WriteAtomicFunc
	}
	if err := write(*out, runfile.Shared, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		if err := writeTidy(bw, list, *format, note); err != nil {
			return err
		}
		return bw.Flush()
	}); errors.Is(err, os.ErrExist) {
		return fail(stderr, fmt.Errorf("export: %s was written meanwhile by another process; add --force to replace it", *out))
	} else if err != nil {
		return fail(stderr, fmt.Errorf("export: %w", err))
	}
	fmt.Fprintf(stdout, "%d runs → %s\n", len(list), *out)
	return 0
}

// checkOut refuses an --out that would land on a run's own file — any
// file a run directory holds under a name the engine writes, however the
// path reaches it (symlinks, ..) — and one that exists, unless force.
func checkOut(out string, force bool) error {
	for _, p := range []string{out, resolved(out)} {
		if dir, base := filepath.Dir(p), filepath.Base(p); engine.OwnFile(base) && engine.IsRunDir(dir) {
			return fmt.Errorf("export: --out %s is %s of the run in %s, which export never writes over; write the table elsewhere", out, base, dir)
		}
	}
	st, err := os.Stat(out)
	switch {
	case err == nil && st.IsDir():
		return fmt.Errorf("export: --out %s is a folder; give a file name, e.g. %s", out, filepath.Join(out, "metrics.csv"))
	case err == nil && !force:
		return fmt.Errorf("export: --out %s exists; add --force to replace it, or choose another file", out)
	}
	return nil
}

// resolved is path p with every symlink of it, and of the folders above
// it, followed, as far as they exist.
func resolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(d, filepath.Base(abs))
	}
	return abs
}

// exportRun is a run directory to export: its path and its name in the
// table (relative to the directory given, "." for that directory itself).
type exportRun struct{ dir, rel string }

// exportRuns finds the runs of dir: dir itself when it is a run, else
// every run below it (the units of a sweep, the runs of an experiment, or
// any folder of runs), as runs.Find finds them.
func exportRuns(dir string) ([]exportRun, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("export: %s is not a directory; give a run, sweep or experiment directory", dir)
		}
		return nil, fmt.Errorf("export: %w", err)
	}
	for _, f := range []string{engine.FileConfig, engine.FileCheckpoint} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return []exportRun{{dir, "."}}, nil
		}
	}
	found, err := runs.Find(dir)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("export: %s holds no run (no %s or %s in it or below it); give a run, sweep or experiment directory", dir, engine.FileConfig, engine.FileCheckpoint)
	}
	out := make([]exportRun, len(found))
	for i, e := range found {
		out[i] = exportRun{e.Dir, filepath.ToSlash(e.Rel)}
	}
	return out, nil
}

// tidyRow is one row of the table --format writes.
type tidyRow struct {
	Run    string  `json:"run"`
	Iter   int     `json:"iter"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
}

// tidyRows are run r's rows: each metrics.jsonl field by its name, each
// validation as val_<metric> and val_<metric>_ci95, by iteration (at an
// iteration, the metrics first). Damaged lines left out are told to note.
func tidyRows(r exportRun, note func(string)) ([]tidyRow, error) {
	metrics, vals, err := readLogs(r.dir, note)
	if err != nil {
		return nil, err
	}
	var out []tidyRow
	add := func(iter int, vs []engine.NamedValue) {
		for _, v := range vs {
			out = append(out, tidyRow{r.rel, iter, strings.ReplaceAll(v.Name, "/", "_"), v.Value})
		}
	}
	for _, m := range metrics {
		add(m.Iter, m.Values())
	}
	for _, v := range vals {
		add(v.Iter, v.Values())
	}
	slices.SortStableFunc(out, func(a, b tidyRow) int { return cmp.Compare(a.Iter, b.Iter) })
	return out, nil
}

// readLogs reads run dir's metrics.jsonl and val.jsonl, telling note of
// the damaged lines it leaves out (a last row cut by a kill is no loss
// and not told).
func readLogs(dir string, note func(string)) ([]engine.MetricsRow, []engine.ValRow, error) {
	mpath, vpath := filepath.Join(dir, engine.FileMetrics), filepath.Join(dir, engine.FileVal)
	metrics, mskip, err := runfile.ReadRows[engine.MetricsRow](mpath)
	if err != nil {
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	vals, vskip, err := runfile.ReadRows[engine.ValRow](vpath)
	if err != nil {
		return nil, nil, fmt.Errorf("export: %w", err)
	}
	for _, n := range []string{runfile.SkippedNote(mpath, mskip), runfile.SkippedNote(vpath, vskip)} {
		if n != "" {
			note(n)
		}
	}
	return metrics, vals, nil
}

// writeTidy writes every run's rows as CSV or as a JSON array, a run at a
// time, so that a large sweep is never held whole.
func writeTidy(w io.Writer, list []exportRun, format string, note func(string)) error {
	var cw *csv.Writer
	if format == "csv" {
		cw = csv.NewWriter(w)
		cw.Write([]string{"run", "iter", "metric", "value"})
	} else {
		io.WriteString(w, "[")
	}
	n := 0
	for _, r := range list {
		rows, err := tidyRows(r, note)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if cw != nil {
				cw.Write([]string{row.Run, strconv.Itoa(row.Iter), row.Metric, strconv.FormatFloat(row.Value, 'g', -1, 64)})
				continue
			}
			b, err := json.Marshal(row)
			if err != nil {
				return fmt.Errorf("export: %s, iteration %d, %s: %w", r.dir, row.Iter, row.Metric, err)
			}
			if n > 0 {
				io.WriteString(w, ",")
			}
			io.WriteString(w, "\n")
			w.Write(b)
			n++
		}
	}
	if cw != nil {
		cw.Flush()
		return cw.Error()
	}
	if n > 0 {
		io.WriteString(w, "\n")
	}
	_, err := io.WriteString(w, "]\n")
	return err
}

// exportTensorBoard writes an event file into each run of list from its
// logs and checkpoints. A run that has event files already (every run
// writes its own as it trains) is said to need nothing, unless force
// rewrites them. A run that cannot be exported (in use, unreadable) is
// noted and the others go on; the exit status is then 1.
func exportTensorBoard(list []exportRun, force bool, data string, dataSet bool, stdout, stderr io.Writer) int {
	failed := 0
	for _, r := range list {
		d := data
		recordedData(r.dir, map[string]bool{"data": dataSet}, &d)
		msg, notes, err := exportEvents(r.dir, force, d)
		for _, n := range notes {
			say(stderr, "note: %s: %s", r.dir, n)
		}
		if err != nil {
			say(stderr, "%v", err)
			failed++
			continue
		}
		fmt.Fprintf(stdout, "%s: %s\n", r.dir, msg)
	}
	if failed > 0 {
		if len(list) > 1 {
			say(stderr, "%d of %d runs not exported", failed, len(list))
		}
		return 1
	}
	return 0
}

// exportEvents writes the event file of run dir: the scalars of every
// metrics.jsonl and val.jsonl row, and the ω histograms of its last and
// best checkpoints, each at its iteration. It holds the run's lock, so
// that no process trains it meanwhile. Old event files are replaced with
// force, else the run is left as it is and msg says so; they go only once
// the new file is written whole.
func exportEvents(dir string, force bool, data string) (msg string, notes []string, err error) {
	lock, err := engine.LockRun(dir)
	if err != nil {
		return "", nil, fmt.Errorf("export: %w", err)
	}
	defer lock.Release()
	old, err := tbevents.Files(dir)
	if err != nil {
		return "", nil, fmt.Errorf("export: %w", err)
	}
	if len(old) > 0 && !force {
		// A run writes its own event file as it trains: such a run needs
		// nothing, which is not a failure.
		return fmt.Sprintf("already has event files (%s): nothing to do (--force rewrites them)", filepath.Base(old[0])), nil, nil
	}
	metrics, vals, err := readLogs(dir, func(n string) { notes = append(notes, n) })
	if err != nil {
		return "", nil, err
	}
	wall := wallClock(dir, metrics, vals)
	var evs []tbevents.Event
	for _, m := range metrics {
		evs = append(evs, engine.MetricsEvent(m, wall(m.Iter)))
	}
	for _, v := range vals {
		evs = append(evs, engine.ValEvent(v, wall(v.Iter)))
	}
	omega, note := omegaEvents(dir, data, wall)
	if note != "" {
		notes = append(notes, note)
	}
	evs = append(evs, omega...)
	if len(evs) == 0 {
		return "", notes, fmt.Errorf("export: %s has no metrics rows or checkpoints yet: nothing to export", dir)
	}
	// In step order, as a live run writes them (stable: at one step, the
	// metrics before the validation before the histograms).
	slices.SortStableFunc(evs, func(a, b tbevents.Event) int { return cmp.Compare(a.Step, b.Step) })
	// Named and dated for the run's start, as the live run's file was.
	w, err := tbevents.Create(dir, wall(0), runfile.Private)
	if err != nil {
		return "", notes, fmt.Errorf("export: %s: %w", dir, err)
	}
	if err := w.Write(evs...); err != nil {
		w.Close()
		os.Remove(w.Path())
		return "", notes, fmt.Errorf("export: %w", err)
	}
	if err := w.Close(); err != nil {
		os.Remove(w.Path())
		return "", notes, fmt.Errorf("export: %w", err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return "", notes, fmt.Errorf("export: the new %s is written, but the old %s could not be removed: %w", filepath.Base(w.Path()), f, err)
		}
	}
	msg = fmt.Sprintf("%d metrics rows, %d validations, %d ω histogram steps → %s", len(metrics), len(vals), len(omega), filepath.Base(w.Path()))
	if len(old) > 0 {
		msg += fmt.Sprintf(" (replacing %d event files)", len(old))
	}
	return msg, notes, nil
}

// wallClock estimates when a run reached each iteration — the logs keep
// no clock time — so that TensorBoard's time axes are roughly right:
// from config.json's time (the run's start), at the training rate of its
// summary, else of its last validation.
func wallClock(dir string, metrics []engine.MetricsRow, vals []engine.ValRow) func(iter int) time.Time {
	start := time.Now()
	for _, f := range []string{engine.FileConfig, engine.FileMetrics} {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
			start = st.ModTime()
			break
		}
	}
	var sec float64 // training seconds per iteration
	if sum, err := engine.ReadSummary(dir); err == nil && sum != nil && sum.MsPerIter > 0 {
		sec = sum.MsPerIter / 1000
	} else if n := len(vals); n > 0 && vals[n-1].Iter > 0 {
		sec = vals[n-1].TrainSeconds / float64(vals[n-1].Iter)
	}
	return func(iter int) time.Time { return start.Add(time.Duration(float64(iter) * sec * float64(time.Second))) }
}

// omegaEvents are the ω histograms of run dir's checkpoints (the last, and
// the best validation's when it is another iteration), drawn on its
// display task as the live run draws them. Without the data, or for a
// model without bases, there are none, and note says why when it is not
// the model's nature.
func omegaEvents(dir, data string, wall func(int) time.Time) (evs []tbevents.Event, note string) {
	var cks []*engine.Checkpoint
	for _, f := range []string{engine.FileBest, engine.FileCheckpoint} {
		path := filepath.Join(dir, f)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		ck, err := engine.LoadCheckpoint(path)
		if err != nil {
			return nil, fmt.Sprintf("ω histograms left out: %v", err)
		}
		if len(cks) == 0 || cks[0].Iter != ck.Iter {
			cks = append(cks, ck)
		}
	}
	if len(cks) == 0 || cks[0].Config.Kernel == engine.KernelRBF {
		return nil, ""
	}
	srcs, err := presets.NewSources(cks[0].Source, cks[0].Config, data)
	if err != nil {
		return nil, fmt.Sprintf("ω histograms left out (scalars only): %v", firstLineOf(err.Error()))
	}
	for _, ck := range cks {
		m, err := ck.Model(srcs.Train)
		if err != nil {
			return evs, fmt.Sprintf("ω histograms of iteration %d left out: %v", ck.Iter, err)
		}
		d, err := m.Display(ck.Iter, 0, 1)
		m.Close()
		if err != nil {
			return evs, fmt.Sprintf("ω histograms of iteration %d left out: %v", ck.Iter, err)
		}
		if e := engine.OmegaEvent(d, wall(ck.Iter)); e != nil {
			evs = append(evs, *e)
		}
	}
	return evs, ""
}

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
