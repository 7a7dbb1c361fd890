package experiments

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/tbevents"
	"github.com/mkbench/mkbench/presets"
)

func mamlJob(t *testing.T, dir string, iters int) BaselineJob {
	t.Helper()
	p, err := presets.Get("sine-5shot")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config
	c.Iters, c.EvalTasks, c.EvalQuery, c.CheckpointSec = iters, 50, 20, 0
	return BaselineJob{Preset: p.Name, Config: c, Train: datasets.Sine{}, Dir: dir}
}

// TestMAMLBaselineResume stops a baseline run part-way and continues it:
// parameters, metrics.jsonl and the evaluation are the uninterrupted
// run's.
func TestMAMLBaselineResume(t *testing.T) {
	const iters = 150
	whole := t.TempDir()
	want, err := MAMLBaseline(context.Background(), mamlJob(t, whole, iters))
	if err != nil {
		t.Fatal(err)
	}
	if want.Iters != iters || want.Eval.Tasks != 50 || want.Eval.Query != 20 {
		t.Fatalf("result %+v", want)
	}
	parts := t.TempDir()
	// The stop lands wherever the clock says, mid-window as a rule.
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	_, err = MAMLBaseline(ctx, mamlJob(t, parts, iters))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stopped run: %v", err)
	}
	stopped, err := LoadMAML(parts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped after %d iterations", stopped.Iter)
	// A process killed after its checkpoint may have written more rows.
	f, _ := os.OpenFile(filepath.Join(parts, engine.FileMetrics), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"iter":100000,"loss":1}` + "\n")
	f.Close()
	got, err := MAMLBaseline(context.Background(), mamlJob(t, parts, iters))
	if err != nil {
		t.Fatal(err)
	}
	if got.Eval.Mean != want.Eval.Mean || got.Iters != iters {
		t.Errorf("continued run: %v after %d iterations, uninterrupted %v", got.Eval, got.Iters, want.Eval)
	}
	a, _ := LoadMAML(whole)
	b, _ := LoadMAML(parts)
	for i := range a.Params {
		if a.Params[i] != b.Params[i] {
			t.Fatalf("parameter %d: %v continued, %v uninterrupted", i, b.Params[i], a.Params[i])
		}
	}
	ma, _ := os.ReadFile(filepath.Join(whole, engine.FileMetrics))
	mb, _ := os.ReadFile(filepath.Join(parts, engine.FileMetrics))
	if !bytes.Equal(ma, mb) || bytes.Count(ma, []byte("\n")) != iters/10 {
		t.Errorf("metrics.jsonl differs:\n%s\nuninterrupted:\n%s", mb, ma)
	}
	// The event files hold the loss of every metrics row once, resumed or
	// not; the resumed run's second file starts with a SessionLog START.
	lossA, startsA := mamlEvents(t, whole)
	lossB, startsB := mamlEvents(t, parts)
	if len(lossA) != iters/10 || !slices.Equal(lossA, lossB) || startsA != 0 || startsB != 1 {
		t.Errorf("events: %d losses, %d starts uninterrupted; %d losses, %d starts continued", len(lossA), startsA, len(lossB), startsB)
	}

	// Another seed in the same directory is refused.
	job := mamlJob(t, parts, iters)
	job.Config.Seed = 2
	if _, err := MAMLBaseline(context.Background(), job); err == nil {
		t.Error("a run with other settings continued another's directory")
	}
}

func TestMAMLBaselineBudgetAndFits(t *testing.T) {
	job := mamlJob(t, t.TempDir(), 1000)
	job.Budget = time.Nanosecond
	xs, ys := []float64{-2, 0, 1, 3, 4}, []float64{1, 0, -1, 0.5, 2}
	job.Fits = []Fit{{Task: 0, GridX: []float64{-5, 0, 5}, Truth: []float64{1, 2, 3}, SupportX: xs, SupportY: ys}}
	res, err := MAMLBaseline(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if res.Iters != 1 {
		t.Errorf("a 1 ns budget trained %d iterations, want 1", res.Iters)
	}
	m, err := LoadMAML(job.Dir)
	if err != nil {
		t.Fatal(err)
	}
	pred := m.Predict(xs, ys, job.Fits[0].GridX, m.Cfg.TestInnerSteps)
	fit := res.Fits[0]
	var mse float64
	for i, y := range fit.Truth {
		if fit.PredMean[i] != pred[i] {
			t.Fatalf("fit predicts %v, Predict %v", fit.PredMean, pred)
		}
		mse += (pred[i] - y) * (pred[i] - y) / 3
	}
	if fit.MSE != mse || fit.PredSD != nil || job.Fits[0].PredMean != nil {
		t.Errorf("fit %+v (MSE want %v); the job's fit must stay untouched", fit, mse)
	}
}

// mamlEvents reads the loss scalars (step and value, in step order) and
// the SessionLog STARTs of dir's event files.
func mamlEvents(t *testing.T, dir string) (loss [][2]float64, starts int) {
	t.Helper()
	files, err := tbevents.Files(dir)
	if err != nil || len(files) == 0 {
		t.Fatalf("event files in %s: %v, %v", dir, files, err)
	}
	for _, f := range files {
		evs, err := tbevents.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Session == tbevents.SessionStart {
				starts++
			}
			for _, v := range e.Values {
				if v.Tag == "loss" {
					loss = append(loss, [2]float64{float64(e.Step), float64(v.Simple)})
				}
			}
		}
	}
	slices.SortFunc(loss, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
	return loss, starts
}
