package export

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/tbevents"
	"github.com/mkbench/mkbench/presets"
)

// Result is what TensorBoard did to one run.
type Result struct {
	// Msg says what was written ("12 metrics rows, … → events.out…"), or
	// that the run needed nothing.
	Msg string
	// Notes are what was left out and why: damaged log lines, ω
	// histograms without the run's data. They come with an error too.
	Notes []string
}

// TensorBoard writes the event file of run dir: the scalars of every
// metrics.jsonl and val.jsonl row, and the ω histograms of its last and
// best checkpoints, each at its iteration, drawn on the data in folder
// data ("" for where mkbench looks). It holds the run's lock, so that no
// process trains it meanwhile. A run that has event files already (every
// run writes its own as it trains) needs nothing, which is not an error,
// unless force rewrites them; the old files go only once the new one is
// written whole.
func TensorBoard(dir string, force bool, data string) (Result, error) {
	var res Result
	lock, err := engine.LockRun(dir)
	if err != nil {
		return res, fmt.Errorf("export: %w", err)
	}
	defer lock.Release()
	old, err := tbevents.Files(dir)
	if err != nil {
		return res, fmt.Errorf("export: %w", err)
	}
	if len(old) > 0 && !force {
		res.Msg = fmt.Sprintf("already has event files (%s): nothing to do (--force rewrites them)", filepath.Base(old[0]))
		return res, nil
	}
	metrics, vals, err := readLogs(dir, func(n string) { res.Notes = append(res.Notes, n) })
	if err != nil {
		return res, err
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
		res.Notes = append(res.Notes, note)
	}
	evs = append(evs, omega...)
	if len(evs) == 0 {
		return res, fmt.Errorf("export: %s has no metrics rows or checkpoints yet: nothing to export", dir)
	}
	// In step order, as a live run writes them (stable: at one step, the
	// metrics before the validation before the histograms).
	slices.SortStableFunc(evs, func(a, b tbevents.Event) int { return cmp.Compare(a.Step, b.Step) })
	// Named and dated for the run's start, as the live run's file was.
	w, err := tbevents.Create(dir, wall(0), runfile.Private)
	if err != nil {
		return res, fmt.Errorf("export: %s: %w", dir, err)
	}
	if err := w.Write(evs...); err != nil {
		w.Close()
		os.Remove(w.Path())
		return res, fmt.Errorf("export: %w", err)
	}
	if err := w.Close(); err != nil {
		os.Remove(w.Path())
		return res, fmt.Errorf("export: %w", err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return res, fmt.Errorf("export: the new %s is written, but the old %s could not be removed: %w", filepath.Base(w.Path()), f, err)
		}
	}
	res.Msg = fmt.Sprintf("%d metrics rows, %d validations, %d ω histogram steps → %s", len(metrics), len(vals), len(omega), filepath.Base(w.Path()))
	if len(old) > 0 {
		res.Msg += fmt.Sprintf(" (replacing %d event files)", len(old))
	}
	return res, nil
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
		first, _, _ := strings.Cut(err.Error(), "\n")
		return nil, fmt.Sprintf("ω histograms left out (scalars only): %v", first)
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
