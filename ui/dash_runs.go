package ui

import (
	"context"
	"errors"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/ui/session"

	"github.com/mkbench/mkbench/internal/runstate"
)

// The dashboard's data: what it knows of each variant's run, and how the
// runs' batches and command replies change it.

// batchMsg carries one batch of run updates from the session.
type batchMsg struct {
	ups []session.Update
	ok  bool
}

// waitBatch is the command that brings the next batch; the dashboard
// arms it (Init) and re-arms it after each one, so exactly one is ever
// waiting.
func waitBatch(s *session.Session) tea.Cmd {
	return func() tea.Msg {
		ups, ok := s.Next()
		return batchMsg{ups, ok}
	}
}

// maxCurvePoints bounds a curve's history; past it every other point is
// dropped, which a chart a few hundred columns wide cannot show anyway.
const maxCurvePoints = 20000

// runView is everything the dashboard knows of one variant's run.
type runView struct {
	variant string
	run     *session.Run   // the latest run of the variant; nil: never started
	state   runstate.State // see runRow.State
	ended   bool
	curve   curve
	last    *engine.Snapshot
	// replied is the iteration the latest command reply was served at:
	// a checkpoint or a pause lands between two snapshots, and the table
	// shows the iteration it saved or holds at (iteration).
	replied int
	display *engine.Display
	eval    *engine.EvalResult
	final   bool
	vals    []session.ValPoint
	err     error
	// evalProg is the progress of an evaluation under way; nil when none.
	evalProg *session.EvalProgress
}

func (v *runView) active() bool { return v.run != nil && !v.ended }

// iteration is the latest iteration the run is known to have completed:
// its newest snapshot's, or a later command reply's.
func (v *runView) iteration() int {
	it := v.replied
	if v.last != nil {
		it = max(it, v.last.Iter)
	}
	return it
}

// shown is the state as the table and status bar say it: a run past its
// last iteration is in its final evaluation, which can take a while.
func (v *runView) shown() runstate.State {
	if v.state == runstate.Running && v.last != nil && v.last.Iters > 0 && v.last.Iter >= v.last.Iters {
		return runstate.Evaluating
	}
	return v.state
}

// apply takes in one batch of run updates.
func (d *dashboard) apply(ups []session.Update) {
	for _, u := range ups {
		var v *runView
		var vi int
		for i, w := range d.views {
			if w.run == u.Run {
				v, vi = w, i
			}
		}
		if v == nil {
			continue // a run the dashboard has since replaced
		}
		sel := vi == d.selected
		if len(u.Points) > 0 {
			v.addPoints(u.Points)
			d.dirty[paneCurves] = true
		}
		if u.Last != nil {
			v.last = u.Last
			if v.state == runstate.Starting {
				v.state = runstate.Running
			}
		}
		if u.Display != nil {
			v.display = u.Display
			if sel {
				d.dirty[paneFit], d.dirty[paneOmega] = true, true
			}
		}
		if u.EvalProgress != nil {
			v.evalProg = u.EvalProgress
		}
		if len(u.Vals) > 0 {
			v.vals = append(v.vals, u.Vals...)
			d.dirty[paneFit] = true
		}
		// An evaluation is over once all its tasks are done or its
		// result (or the run's end) has come.
		if p := v.evalProg; p != nil && (p.Done >= p.Total || u.Eval != nil || len(u.Vals) > 0 || u.Ended) {
			v.evalProg = nil
		}
		if u.Eval != nil {
			v.eval, v.final = u.Eval, u.Final
			if !u.Final && u.Last != nil {
				d.setMsg(fmt.Sprintf("%s at iteration %d: %s", v.variant, u.Last.Iter, u.Eval))
			}
		}
		for _, rep := range u.Replies {
			d.reply(v, rep)
		}
		if u.Ended {
			d.ended(v, u)
		}
		d.dirty[paneRuns] = true
	}
}

func (v *runView) addPoints(ps []session.Point) {
	c := &v.curve
	for _, p := range ps {
		// Snapshots sent for a command repeat an iteration, and one sent
		// before the first step has no loss yet.
		if n := len(c.Iter); n > 0 && float64(p.Iter) <= c.Iter[n-1] || p.Iter == 0 {
			continue
		}
		c.Iter = append(c.Iter, float64(p.Iter))
		c.ELBO = append(c.ELBO, p.ELBO)
		c.Data = append(c.Data, p.Data)
		c.KL = append(c.KL, p.KL)
		c.Loss = append(c.Loss, p.Loss)
	}
	if len(c.Iter) > maxCurvePoints {
		for _, s := range []*[]float64{&c.Iter, &c.ELBO, &c.Data, &c.KL, &c.Loss} {
			x := *s
			k := 0
			for i := 0; i < len(x); i += 2 {
				x[k] = x[i]
				k++
			}
			*s = x[:k]
		}
	}
}

func (d *dashboard) reply(v *runView, rep engine.Reply) {
	if rep.Err != nil {
		d.setErr(fmt.Errorf("%s: %w", v.variant, rep.Err))
		return
	}
	v.replied = max(v.replied, rep.Iter)
	switch rep.Kind {
	case engine.CmdPause:
		if v.state != runstate.Stopping {
			v.state = runstate.Paused
		}
		// Every active run replies; the message is the selected run's,
		// or, when that one is not training, whichever paused.
		if sel := d.views[d.selected]; v == sel || !sel.active() || sel.state == runstate.Stopping {
			d.setMsg(fmt.Sprintf("paused %s at iteration %d; p resumes", v.variant, rep.Iter))
		}
	case engine.CmdResume:
		if v.state == runstate.Paused {
			v.state = runstate.Running
		}
		d.setMsg("resumed")
	case engine.CmdCheckpoint:
		d.setMsg(fmt.Sprintf("checkpoint saved: %s at iteration %d → %s", v.variant, rep.Iter, v.run.Dir))
	}
}

func (d *dashboard) ended(v *runView, u session.Update) {
	v.ended = true
	res, err := u.Result, u.Err
	switch {
	case err == nil:
		v.state = runstate.Finished
		ev := ""
		if res.Eval != nil {
			ev = "; eval " + res.Eval.String()
		}
		d.setMsg(fmt.Sprintf("%s finished %d iterations%s", v.variant, res.Iters, ev))
	case res.Interrupted && (errors.Is(err, context.Canceled) || errors.Is(err, engine.ErrStopped)):
		v.state = runstate.Stopped
		d.setMsg(fmt.Sprintf("%s stopped at iteration %d; checkpoint in %s", v.variant, res.Iters, v.run.Dir))
	default:
		v.state, v.err = runstate.Failed, err
		d.setErr(fmt.Errorf("%s failed: %w", v.variant, err))
	}
	d.markAll()
}
