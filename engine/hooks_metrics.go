package engine

import "github.com/mkbench/mkbench/internal/runfile"

// metricsLog writes metrics.jsonl: every step adds to a window (add), and
// every LogEvery iterations and after the last a row of its averages is
// appended (write, attached with Loop.EveryN). The partial window goes into
// checkpoints, so a resumed run writes the rows of an uninterrupted one.
type metricsLog struct {
	path string // metrics.jsonl
	lr   float64
	log  *runfile.Log
	win  window
}

// add counts a step into the window.
func (ml *metricsLog) add(_ *Loop, st StepStats) error {
	ml.win.N++
	ml.win.Loss += st.Loss
	ml.win.Data += st.Data
	ml.win.KL += st.KL
	ml.win.GradNorm += st.GradNorm
	return nil
}

// write appends the window's row and starts a new window.
func (ml *metricsLog) write(l *Loop, st StepStats) error {
	w, n := ml.win, float64(ml.win.N)
	row := MetricsRow{Iter: l.Iter, Loss: w.Loss / n, Data: w.Data / n, KL: w.KL / n,
		ELBO: -w.Loss / n, Lambda: st.Lambda, LR: ml.lr, GradNorm: w.GradNorm / n}
	if err := ml.log.Append(row); err != nil {
		return err
	}
	ml.win = window{}
	return nil
}

func (ml *metricsLog) close() { ml.log.Close() }
