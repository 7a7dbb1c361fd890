package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/tbevents"
)

// TensorBoard event files.
//
// Every run with a directory writes events.out.tfevents.<time>.<host>.<pid>
// there (package tbevents), so that `tensorboard --logdir runs` shows it:
//
//	loss, data, kl, elbo, lambda, lr, grad_norm   every metrics.jsonl row, at its iteration
//	val/<metric>, val/<metric>_ci95               every val.jsonl row
//	omega/step0 … omega/stepK                     histograms of the display task's bases ω
//	                                              after q0 and each flow step, every
//	                                              SnapshotEvery iterations and at the end
//
// The scalars are derived from the rows as written — the hook reads what
// metrics.jsonl and val.jsonl gained since it last looked — rather than
// from the hooks that write them: one source of truth, the loggers know
// nothing of TensorBoard, and `mkbench export --tensorboard` makes the
// same events of an older run from the same rows (MetricsEvent,
// ValEvent). The ω histograms come from the observer's display when it
// drew one at that iteration (displayTee), else from a display drawn
// here with one draw of ω (the first of the observer's draws: the same
// bases). Neither touches the training's random streams or files.
//
// Each process starts its own file; a resumed run first cuts the older
// files back to its checkpoint's iteration (their later events are the
// orphans of a process that died after it) and writes a SessionLog START
// at the next step, TensorBoard's own restart marker. The events of a
// metrics row go out in one write, so a killed run leaves a readable
// file. Event files are a view of the run, not part of it: an error
// writing them is noted once in the Result and the run goes on without.

// omegaBuckets is the number of buckets of an ω histogram; TensorBoard
// rebins to about as many for display.
const omegaBuckets = 30

// NamedValue is one value of a run's logs by name.
type NamedValue struct {
	Name  string
	Value float64
}

// Values are the row's values under their metrics.jsonl names, in its
// order: the TensorBoard scalars' tags, and the metrics of `mkbench export
// --format`.
func (r MetricsRow) Values() []NamedValue {
	return []NamedValue{{"loss", r.Loss}, {"data", r.Data}, {"kl", r.KL}, {"elbo", r.ELBO},
		{"lambda", r.Lambda}, {"lr", r.LR}, {"grad_norm", r.GradNorm}}
}

// Values are the validation's metric and its 95% interval, named
// val/<metric> and val/<metric>_ci95.
func (r ValRow) Values() []NamedValue {
	return []NamedValue{{"val/" + r.Metric, r.Mean}, {"val/" + r.Metric + "_ci95", r.CI95}}
}

// MetricsEvent is the TensorBoard event of a metrics.jsonl row.
func MetricsEvent(row MetricsRow, wall time.Time) tbevents.Event {
	return scalarsEvent(row.Iter, row.Values(), wall)
}

// ValEvent is the TensorBoard event of a val.jsonl row.
func ValEvent(row ValRow, wall time.Time) tbevents.Event {
	return scalarsEvent(row.Iter, row.Values(), wall)
}

func scalarsEvent(iter int, vals []NamedValue, wall time.Time) tbevents.Event {
	e := tbevents.Event{WallTime: tbevents.WallTime(wall), Step: int64(iter), Values: make([]tbevents.Value, len(vals))}
	for i, v := range vals {
		e.Values[i] = tbevents.Scalar(v.Name, v.Value)
	}
	return e
}

// OmegaEvent is the TensorBoard event of a display's bases: one histogram
// per flow step, omega/step0 (q0) to omega/stepK, at the display's
// iteration; nil when the display has no bases (the RBF kernel).
func OmegaEvent(d *Display, wall time.Time) *tbevents.Event {
	if d == nil || len(d.OmegaSteps) == 0 {
		return nil
	}
	e := &tbevents.Event{WallTime: tbevents.WallTime(wall), Step: int64(d.Iter), Values: []tbevents.Value{}}
	for k, w := range d.OmegaSteps {
		if h := tbevents.NewHistogram(w, omegaBuckets); h != nil {
			e.Values = append(e.Values, tbevents.Value{Tag: fmt.Sprintf("omega/step%d", k), Histo: h})
		}
	}
	return e
}

// eventsLog writes a run's event file: open is a start hook (after the
// logs are opened and cut back), step an after-step hook (after the
// reporter's), end an end hook (after the final validation).
type eventsLog struct {
	dir     string
	resumed bool
	cfg     Config
	m       *Model
	rep     *reporter // whose display task the histograms show
	res     *Result   // where a failure is noted

	loop    *Loop
	w       *tbevents.Writer // nil: not writing (stopped by an error)
	metrics rowTail
	val     rowTail
	omega   bool            // false once the model showed it has no bases to draw
	pending *tbevents.Event // ω histograms of the observer's latest display
}

// open starts the process's event file.
func (ev *eventsLog) open(l *Loop) error {
	ev.loop, ev.omega = l, true
	ev.metrics = rowTail{path: filepath.Join(ev.dir, FileMetrics)}
	ev.val = rowTail{path: filepath.Join(ev.dir, FileVal)}
	ev.metrics.skip()
	ev.val.skip()
	w, err := OpenEvents(ev.dir, l.Start, ev.resumed)
	if err != nil {
		ev.fail(err)
		return nil
	}
	ev.w = w
	return nil
}

// OpenEvents starts this process's event file in run directory dir. A
// run resumed from iteration start first cuts the older files back to it
// and opens its file with a SessionLog START. Baselines that are not
// engine runs (MAML) write their events through it too.
func OpenEvents(dir string, start int, resumed bool) (*tbevents.Writer, error) {
	if resumed {
		files, err := tbevents.Files(dir)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if _, _, err := tbevents.CutBack(f, int64(start), runfile.Private); err != nil {
				return nil, err
			}
		}
	}
	now := time.Now()
	w, err := tbevents.Create(dir, now, runfile.Private)
	if err != nil {
		return nil, err
	}
	if resumed {
		if err := w.Write(tbevents.Event{WallTime: tbevents.WallTime(now), Step: int64(start) + 1, Session: tbevents.SessionStart}); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// step writes the events of the step just done: its new log rows, and
// its ω histograms on the SnapshotEvery grid and at the end.
func (ev *eventsLog) step(l *Loop, _ StepStats) error {
	if ev.w == nil {
		return nil
	}
	c := ev.cfg
	if l.Iter%c.LogEvery == 0 || l.Iter == l.End || c.ValEvery > 0 && l.Iter%c.ValEvery == 0 {
		ev.rows()
	}
	if ev.omegaAt(l.Iter) {
		ev.histograms(l)
	}
	return nil
}

// end writes what the end hooks logged: the final validation of a run
// whose last iteration is off the ValEvery grid.
func (ev *eventsLog) end(*Loop, Ending) error {
	if ev.w != nil {
		ev.rows()
	}
	return nil
}

func (ev *eventsLog) close() {
	ev.w.Close()
	ev.w = nil
}

// omegaAt reports whether the ω histograms are due at iteration iter.
func (ev *eventsLog) omegaAt(iter int) bool {
	return ev.w != nil && ev.omega && (iter%ev.cfg.SnapshotEvery == 0 || iter == ev.loop.End)
}

// rows writes the events of the rows the logs gained.
func (ev *eventsLog) rows() {
	now := time.Now()
	var evs []tbevents.Event
	err := ev.metrics.read(func(line []byte) {
		var row MetricsRow
		if json.Unmarshal(line, &row) == nil {
			evs = append(evs, MetricsEvent(row, now))
		}
	})
	if err == nil {
		err = ev.val.read(func(line []byte) {
			var row ValRow
			if json.Unmarshal(line, &row) == nil {
				evs = append(evs, ValEvent(row, now))
			}
		})
	}
	if err != nil {
		ev.fail(err)
		return
	}
	if len(evs) > 0 {
		ev.write(evs...)
	}
}

// histograms writes the ω histograms of iteration l.Iter: the observer's
// display's when it drew one, else a display drawn here.
func (ev *eventsLog) histograms(l *Loop) {
	e := ev.pending
	ev.pending = nil
	if e == nil || e.Step != int64(l.Iter) {
		d, err := ev.display(l)
		if err != nil {
			if l.Context().Err() == nil {
				ev.res.note("TensorBoard events: the ω histograms stopped at iteration %d: %v", l.Iter, err)
				ev.omega = false
			}
			return
		}
		if e = OmegaEvent(d, time.Now()); e == nil {
			ev.omega = false // no bases to show: the RBF kernel, or no display
			return
		}
	}
	ev.write(*e)
}

// display draws the display task with one draw of ω. A panic (a damaged
// record of a streamed data set) is an error here: the histograms stop,
// and training meets the damage itself if it ever draws that record.
func (ev *eventsLog) display(l *Loop) (d *Display, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return ev.m.Display(l.Iter, ev.rep.task, 1)
}

func (ev *eventsLog) write(evs ...tbevents.Event) {
	if err := ev.w.Write(evs...); err != nil {
		ev.fail(err)
	}
}

// fail notes err once and stops writing events.
func (ev *eventsLog) fail(err error) {
	ev.res.note("TensorBoard events: %v; the run went on without them (rebuild them with mkbench export %s --tensorboard)", err, ev.dir)
	ev.close()
}

// displayTee passes snapshots on to the run's observer, keeping the ω
// histograms of a display drawn on the histograms' grid. They are made
// before the observer gets the snapshot, which it then owns.
type displayTee struct {
	ev  *eventsLog
	obs Observer
}

func (t displayTee) Observe(s Snapshot) error {
	if d := s.Display; d != nil && t.ev.loop != nil && t.ev.omegaAt(d.Iter) {
		t.ev.pending = OmegaEvent(d, time.Now())
	}
	return t.obs.Observe(s)
}

// rowTail reads the lines a JSON-lines log gained since it last looked.
type rowTail struct {
	path string
	off  int64
}

// skip passes over what the log holds now.
func (t *rowTail) skip() {
	if st, err := os.Stat(t.path); err == nil {
		t.off = st.Size()
	}
}

// read calls fn with each complete line added since the last call; a
// line still being written is left for the next.
func (t *rowTail) read(fn func(line []byte)) error {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= t.off {
		return err
	}
	buf := make([]byte, st.Size()-t.off)
	if _, err := f.ReadAt(buf, t.off); err != nil {
		return fmt.Errorf("reading %s: %w", t.path, err)
	}
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		return nil
	}
	t.off += int64(end) + 1
	for _, line := range bytes.Split(buf[:end], []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) > 0 {
			fn(line)
		}
	}
	return nil
}
