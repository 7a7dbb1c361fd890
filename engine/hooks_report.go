package engine

import (
	"fmt"
	"math"
	"time"
)

// Snapshot is a copy of the run's state handed to an Observer. The engine
// throttles snapshots (RunOptions.ReportEvery); the observer owns it.
type Snapshot struct {
	Iter, Iters                      int // completed iterations, total
	Loss, Data, KL, ELBO, Lambda, LR float64
	GradNorm                         float64
	Wall                             time.Duration // training time so far, resumed runs included
	ItersPerSec                      float64       // over this process's iterations
	Display                          *Display      // set when a display snapshot was taken
	Eval                             *EvalResult   // set by the final evaluation (with Done) and by CmdEvaluate
	Val                              *EvalResult   // set when a validation ran at Iter (Config.ValEvery)
	Done                             bool
}

// Observer watches a run. Returning an error stops the run after a
// checkpoint; return ErrStopped for an ordinary stop.
type Observer interface {
	Observe(Snapshot) error
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Snapshot) error

// Observe calls f.
func (f ObserverFunc) Observe(s Snapshot) error { return f(s) }

// maxETA caps Remaining: beyond it a time.Duration would overflow, and no
// one waits longer anyway.
const maxETA = 100 * 365 * 24 * time.Hour

// Remaining is the time the iterations from done to total take at perSec
// iterations a second; negative when the rate is not known or nothing
// is left.
func Remaining(done, total int, perSec float64) time.Duration {
	if perSec <= 0 || total <= done {
		return -1
	}
	sec := float64(total-done) / perSec
	if !(sec < maxETA.Seconds()) {
		return maxETA
	}
	return time.Duration(sec * float64(time.Second))
}

// FormatRate formats a training speed with three significant figures up to
// 100 iterations a second ("0.712 it/s", "3.05 it/s", "412 it/s"): an
// Omniglot run's 0.7 or 1.4 iterations a second both printed "1 it/s" when
// rounded to a whole number, which said nothing about its pace.
func FormatRate(perSec float64) string {
	switch {
	case !(perSec > 0) || math.IsInf(perSec, 0):
		return "– it/s"
	case perSec >= 99.95:
		return fmt.Sprintf("%.0f it/s", perSec)
	case perSec >= 9.995:
		return fmt.Sprintf("%.1f it/s", perSec)
	case perSec >= 0.9995:
		return fmt.Sprintf("%.2f it/s", perSec)
	default:
		return fmt.Sprintf("%.3f it/s", perSec)
	}
}

// FormatETA formats a remaining time to the second, "–" when unknown
// (negative), as every progress line and status bar shows it.
func FormatETA(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return d.Round(time.Second).String()
}

// reporter hands a run's observer its snapshots. After a step (step) it
// reports at most every ReportEvery, but always when the step drew the
// display (every SnapshotEvery iterations, the first of this process and
// the last) or validated. Commands (control.go) and the final evaluation
// (run_eval.go) report through its snapshot and display task too.
type reporter struct {
	obs      Observer // nil: step is not attached
	m        *Model
	lr       float64
	every    int           // Config.SnapshotEvery
	task     int           // the display task; CmdDisplayTask changes it
	draws    int           // ω draws for the display's spread
	throttle time.Duration // RunOptions.ReportEvery
	val      *validator    // nil when the run does not validate
	last     time.Time     // of the last throttled report
}

// snapshot is the loop's state as an Observer sees it.
func (p *reporter) snapshot(l *Loop) Snapshot {
	st := l.Last
	s := Snapshot{Iter: l.Iter, Iters: l.End, Loss: st.Loss, Data: st.Data, KL: st.KL,
		ELBO: -st.Loss, Lambda: st.Lambda, LR: p.lr, GradNorm: st.GradNorm,
		Wall: time.Duration(l.TrainSeconds() * float64(time.Second))}
	if done, el := l.Iter-l.Start, l.Elapsed(); done > 0 && el > 0 {
		s.ItersPerSec = float64(done) / el.Seconds()
	}
	return s
}

// display draws the display task at the loop's iteration; nil when the
// task family has no display.
func (p *reporter) display(l *Loop) (*Display, error) {
	return p.m.Display(l.Iter, p.task, p.draws)
}

// step is the after-step hook. An observer's error interrupts the run.
func (p *reporter) step(l *Loop, _ StepStats) error {
	var disp *Display
	if l.Iter%p.every == 0 || l.Iter == l.End || l.Iter == l.Start+1 {
		var err error
		if disp, err = p.display(l); err != nil {
			return err
		}
	}
	var val *EvalResult
	if p.val != nil {
		val = p.val.take()
	}
	if disp == nil && val == nil && time.Since(p.last) < p.throttle {
		return nil
	}
	p.last = time.Now()
	s := p.snapshot(l)
	s.Display, s.Val = disp, val
	return Interrupt(p.obs.Observe(s))
}
