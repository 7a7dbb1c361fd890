package ui

import (
	"errors"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/runs"
	"github.com/mkbench/mkbench/presets"
	"github.com/mkbench/mkbench/ui/session"

	"github.com/mkbench/mkbench/internal/runstate"
)

// Opening a finished run: its files become one session.Update, which a
// read-only dashboard takes in like a live run's batches, so the panes
// are the dashboard's own: the curves from metrics.jsonl, the validation
// curve from val.jsonl, the final evaluation from summary.json, and the ω
// panes (and sine fit) drawn from the checkpoint the summary evaluated.

// openedRun is a run directory read for the workbench.
type openedRun struct {
	Dir    string
	Model  string // the shipped model it holds, if any
	Preset presets.Preset
	Run    *session.Run
	Update session.Update
	// Note says what could not be shown (the ω panes need the run's
	// data set to draw a task) or that an earlier model in Dir was moved
	// aside; "" when neither.
	Note string
	// NoDisplay says why the fit and ω panes have nothing to draw (the
	// run's data set is missing, and how to get it); "" when they have.
	NoDisplay string
}

// runOpenedMsg brings an opened run, or why it could not be opened.
type runOpenedMsg struct {
	run openedRun
	err error
}

// openRunCmd reads run directory dir in the background; model names the
// shipped model it holds ("" for an ordinary run). data is the data
// folder when the run did not record one ("" is the default search).
func openRunCmd(dir, model, data string) tea.Cmd {
	return func() tea.Msg {
		r, err := openRun(dir, data)
		r.Model = model
		return runOpenedMsg{r, err}
	}
}

// fitDisplayDraws is the draws of the bases behind an opened regression
// run's sine fit: its band is their spread.
const fitDisplayDraws = 20

// openRun reads run directory dir.
func openRun(dir, data string) (openedRun, error) {
	rc, err := engine.ReadRunConfig(dir)
	if err != nil {
		return openedRun{}, err
	}
	p, err := presets.Get(rc.Preset)
	if err != nil {
		return openedRun{}, fmt.Errorf("%s: %w", dir, err)
	}
	p.Config, p.Variant = rc.Config, rc.Config.Variant()
	r := openedRun{Dir: dir, Preset: p, Run: &session.Run{Variant: p.Variant, Dir: dir, Config: rc.Config}}
	u := session.Update{Run: r.Run, Ended: true}

	curves, err := runs.ReadCurves(dir)
	if err != nil {
		return r, err
	}
	metrics := curves.Metrics
	for _, m := range metrics {
		u.Points = append(u.Points, session.Point{Iter: m.Iter, Loss: m.Loss, Data: m.Data, KL: m.KL, ELBO: m.ELBO})
	}
	for _, v := range curves.Val {
		u.Vals = append(u.Vals, session.ValPoint{Iter: v.Iter, Eval: engine.EvalResult{Metric: v.Metric, Mean: v.Mean, CI95: v.CI95, Tasks: v.Tasks}})
	}
	sum, err := engine.ReadSummary(dir)
	if err != nil {
		return r, err
	}
	last := &engine.Snapshot{Iters: rc.Config.Iters}
	if n := len(metrics); n > 0 {
		m := metrics[n-1]
		last.Iter, last.Loss, last.Data, last.KL, last.ELBO, last.Lambda, last.LR = m.Iter, m.Loss, m.Data, m.KL, m.ELBO, m.Lambda, m.LR
	}
	if sum != nil {
		last.Iter = max(last.Iter, sum.Iters)
		last.Wall = secondsETA(sum.TrainSeconds)
		u.Eval, u.Final = sum.Eval, sum.Eval != nil
		u.Result = engine.Result{Dir: dir, Iters: sum.Iters, Eval: sum.Eval, TrainSeconds: sum.TrainSeconds}
	} else {
		u.Result = engine.Result{Dir: dir, Iters: last.Iter, Interrupted: true}
		u.Err = errNotFinished
	}
	u.Last = last
	disp, err := runDisplay(dir, rc, data)
	if err != nil {
		r.Note = "ω panes: " + firstLine(err.Error())
		r.NoDisplay = noDisplay(p.Source, err)
	}
	u.Display = disp
	r.Update = u
	return r, nil
}

// missingData are the errors of a data set that is not on this machine.
var missingData = []error{datasets.ErrNoOmniglot, datasets.ErrNoMiniImageNet, datasets.ErrNoCIFAR,
	datasets.ErrNoDomainNet, datasets.ErrNoMetaDataset, datasets.ErrNoEmbeddings, datasets.ErrNoFolder}

// noDisplay is what the fit and ω panes of an opened run say instead of
// its display, which err kept from being drawn: a missing data set is
// named with the way to get it, since the rest of the run (its curves, its
// evaluation) is shown without it.
func noDisplay(family string, err error) string {
	for _, e := range missingData {
		if errors.Is(err, e) {
			// The command on a line of its own: wrapped, it stays whole.
			return fmt.Sprintf("the ω panes draw a task of the %s data set, which is not on this machine; get it with\n"+
				"mkbench data get %s\n"+
				"or open the workbench with --data DIR. The curves and the evaluation are the run's own.", family, family)
		}
	}
	return "no ω to draw: " + firstLine(err.Error())
}

// errNotFinished ends an opened run that has no summary.json: the
// dashboard shows it as stopped, resumable.
var errNotFinished = fmt.Errorf("%w: the run has no summary.json", engine.ErrStopped)

// runDisplay draws the display task with the parameters the run's
// summary evaluated, under the run's lock so that no run rewrites them
// meanwhile.
func runDisplay(dir string, rc engine.RunConfig, data string) (*engine.Display, error) {
	lock, _, err := engine.LockRunToRead(dir) // the dashboard's note says nothing of the lock: reading needs none on read-only media
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	ck, _, _, err := engine.LoadEvalCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	if rc.Data != "" {
		data = rc.Data
	}
	srcs, err := presets.NewSources(ck.Source, ck.Config, data)
	if err != nil {
		return nil, err
	}
	m, err := ck.Model(srcs.Train)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	draws := 1
	if !ck.Config.Classify() {
		draws = fitDisplayDraws
	}
	return m.Display(ck.Iter, 0, draws)
}

// newOpenedDashboard is the read-only dashboard of an opened run.
func newOpenedDashboard(t Theme, k dashKeys, r openedRun) *dashboard {
	d := newDashboard(t, k, nil, r.Preset)
	d.readOnly, d.opened, d.noDisplay = true, true, r.NoDisplay
	vi := variantIndex(r.Run.Variant)
	d.views[vi].run, d.views[vi].state = r.Run, runstate.Starting
	d.selected = vi
	d.apply([]session.Update{r.Update})
	what := "a finished run"
	if r.Update.Err != nil {
		what = "a stopped run"
	}
	if r.Model != "" {
		what = "model " + r.Model
	}
	msg := what + " · esc back · X experiments on it (versatility)"
	if r.Note != "" {
		msg = r.Note
	}
	d.setMsg(msg)
	return d
}
