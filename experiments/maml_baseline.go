package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/tbevents"
)

var _ BaselineFunc = MAMLBaseline

// MAMLConfigFor is the MAML configuration of one experiment point: the MAML
// paper's method settings (DefaultMAMLConfig) with the point's data and
// protocol — shot, query points, meta-batch, iterations, seed and
// evaluation size — taken from the engine config the MetaKernel runs of
// the point use.
func MAMLConfigFor(c engine.Config) MAMLConfig {
	m := DefaultMAMLConfig(c.Shot)
	m.MetaBatch, m.Query, m.Iters, m.Seed = c.MetaBatch, c.Query, c.Iters, c.Seed
	m.EvalTasks, m.EvalQuery = c.EvalTasks, c.EvalQuery
	return m
}

// MAMLBaseline is the BaselineFunc of the MAML baseline ("maml"). It trains
// on job.Train with MAMLConfigFor(job.Config), keeping maml.json (model and
// optimizer) and metrics.jsonl (engine.MetricsRow lines, loss = data = the
// query MSE after adaptation, every Config.LogEvery iterations) and their
// TensorBoard event file in job.Dir; a job.Dir holding an interrupted
// MAML run of the same settings is continued, and the result is the
// uninterrupted run's. It checkpoints
// every Config.CheckpointSec seconds and when stopped, honours job.Budget
// as engine.RunOptions.Budget does, evaluates on job.Test (else
// job.Train) with the engine's protocol and predicts job.Fits' grids from
// their support sets after TestInnerSteps steps.
func MAMLBaseline(ctx context.Context, job BaselineJob) (BaselineResult, error) {
	if job.Config.Classify() || job.Train == nil {
		return BaselineResult{}, fmt.Errorf("experiments: the MAML baseline runs on regression tasks only (preset %s)", job.Preset)
	}
	cfg := MAMLConfigFor(job.Config)
	if err := cfg.Validate(); err != nil {
		return BaselineResult{}, err
	}
	m := newMAMLOn(cfg, job.Train)
	if job.Dir != "" {
		if err := os.MkdirAll(job.Dir, 0o755); err != nil {
			return BaselineResult{}, fmt.Errorf("experiments: cannot create run directory: %w", err)
		}
		if err := m.resumeFrom(job.Dir); err != nil {
			return BaselineResult{}, err
		}
	}
	logEvery := max(job.Config.LogEvery, 1)
	var metrics *runfile.Log
	if job.Dir != "" {
		// Rows past the checkpoint, which a process stopped after it may
		// have written, are dropped: they are computed again.
		var err error
		if metrics, err = runfile.OpenLog(filepath.Join(job.Dir, engine.FileMetrics), m.Iter, runfile.Shared); err != nil {
			return BaselineResult{}, err
		}
		defer metrics.Close()
	}
	// TensorBoard events of the metrics rows, as an engine run writes them.
	// They are a view of the run: an error writing them stops them, never
	// the training (mkbench export --tensorboard rebuilds them).
	var events *tbevents.Writer
	if job.Dir != "" {
		events, _ = engine.OpenEvents(job.Dir, m.Iter, m.Iter > 0)
		defer func() { events.Close() }()
	}
	save := func() error {
		if job.Dir == "" {
			return nil
		}
		return m.Save(job.Dir)
	}
	ckptEvery := time.Duration(max(job.Config.CheckpointSec, 0)) * time.Second
	lastCkpt := time.Now()
	err := m.train(ctx, func() error {
		w := &m.window
		w.N++
		w.Loss += m.LastLoss
		w.GradNorm += m.LastGradNorm
		if job.Budget > 0 && m.Iter < m.Cfg.Iters && m.TrainSeconds >= job.Budget.Seconds() {
			m.Cfg.Iters = m.Iter // out of time: this was the last iteration
		}
		if metrics != nil && (m.Iter%logEvery == 0 || m.Iter == m.Cfg.Iters) {
			n := float64(w.N)
			row := engine.MetricsRow{Iter: m.Iter, Loss: w.Loss / n, Data: w.Loss / n, ELBO: -w.Loss / n,
				LR: m.Cfg.OuterLR, GradNorm: w.GradNorm / n}
			if err := metrics.Append(row); err != nil {
				return err
			}
			if events != nil && events.Write(engine.MetricsEvent(row, time.Now())) != nil {
				events.Close()
				events = nil
			}
			*w = mamlWindow{}
		}
		if ckptEvery > 0 && time.Since(lastCkpt) >= ckptEvery {
			lastCkpt = time.Now()
			return save()
		}
		return nil
	})
	// Training stops before an update that would make the parameters
	// non-finite, so the model saved here is always a good one.
	if serr := save(); serr != nil {
		if err != nil {
			return BaselineResult{}, fmt.Errorf("%w; and the checkpoint could not be saved: %v", err, serr)
		}
		return BaselineResult{}, serr
	}
	if err != nil {
		return BaselineResult{Iters: m.Iter, TrainSeconds: m.TrainSeconds}, err
	}
	evalSrc := job.Train
	if job.Test != nil {
		evalSrc = job.Test
	}
	ev, err := m.evaluateOn(evalSrc, cfg.EvalTasks, cfg.EvalQuery, cfg.Seed)
	if err != nil {
		return BaselineResult{}, err
	}
	res := BaselineResult{Eval: ev, Iters: m.Iter, TrainSeconds: m.TrainSeconds}
	for _, f := range job.Fits {
		f.PredMean = m.Predict(f.SupportX, f.SupportY, f.GridX, cfg.TestInnerSteps)
		f.PredSD, f.Draws, f.MSE = nil, 1, 0
		for i, y := range f.Truth {
			f.MSE += (f.PredMean[i] - y) * (f.PredMean[i] - y) / float64(len(f.Truth))
		}
		res.Fits = append(res.Fits, f)
	}
	return res, nil
}

// resumeFrom loads dir's maml.json into m when there is one. Its settings
// must be m's, except the number of iterations, which the job sets.
func (m *MAMLModel) resumeFrom(dir string) error {
	path := filepath.Join(dir, FileMAML)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	old, err := LoadMAML(dir)
	if err != nil {
		return err
	}
	a, b := old.Cfg, m.Cfg
	a.Iters, b.Iters = 0, 0
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		return fmt.Errorf("experiments: %s holds a MAML run with other settings (%s, want %s); use another directory", path, ja, jb)
	}
	old.Cfg.Iters, old.src = m.Cfg.Iters, m.src
	*m = *old
	return nil
}
