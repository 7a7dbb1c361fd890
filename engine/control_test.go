package engine

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/testutil"
)

// controlOpts reports every iteration, so tests can act at a known one.
func controlOpts(dir string, ch <-chan Command) RunOptions {
	return RunOptions{Preset: "test", Dir: dir, ReportEvery: time.Nanosecond, Control: ch}
}

// replies collects Replies sent from the run's goroutine.
type replies struct{ ch chan Reply }

func newReplies() *replies         { return &replies{ch: make(chan Reply, 16)} }
func (r *replies) reply(rep Reply) { r.ch <- rep }
func (r *replies) wait(t *testing.T) Reply {
	t.Helper()
	select {
	case rep := <-r.ch:
		return rep
	case <-time.After(60 * time.Second):
		t.Fatal("no reply")
	}
	return Reply{}
}

// A checkpoint command writes the checkpoint of the iteration it was
// served at, before the next step runs.
func TestControlCheckpointNow(t *testing.T) {
	dir := t.TempDir()
	ch := make(chan Command, 1)
	rs := newReplies()
	var checked bool
	var rep *Reply
	cfg := tinyConfig("vrf", 12)
	_, err := Run(context.Background(), cfg, sineLike{}, controlOpts(dir, ch), ObserverFunc(func(s Snapshot) error {
		switch {
		case s.Iter == 3:
			ch <- Command{Kind: CmdCheckpoint, Reply: rs.reply}
		case s.Iter == 4:
			r := rs.wait(t)
			rep = &r
			ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint))
			if err != nil {
				t.Errorf("no checkpoint after the command: %v", err)
				return nil
			}
			checked = ck.Iter == 3
			if !checked {
				t.Errorf("checkpoint at iteration %d, want 3", ck.Iter)
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if rep == nil || rep.Kind != CmdCheckpoint || rep.Iter != 3 || rep.Err != nil {
		t.Fatalf("reply %+v", rep)
	}
	if !checked {
		t.Fatal("checkpoint not verified")
	}
}

// Evaluating mid-run reports a non-final Eval snapshot and leaves training
// exactly as it would have been: the metrics match a run without it.
func TestControlEvaluateNowLeavesTrainingUnchanged(t *testing.T) {
	root := t.TempDir()
	cfg := tinyConfig("vrf+ctx", 12)
	plain := filepath.Join(root, "plain")
	if _, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: plain}, nil); err != nil {
		t.Fatal(err)
	}
	ch := make(chan Command, 1)
	rs := newReplies()
	var evals []Snapshot
	evald := filepath.Join(root, "evald")
	res, err := Run(context.Background(), cfg, sineLike{}, controlOpts(evald, ch), ObserverFunc(func(s Snapshot) error {
		if s.Iter == 5 && s.Eval == nil {
			ch <- Command{Kind: CmdEvaluate, Tasks: 20, Reply: rs.reply}
		}
		if s.Eval != nil {
			evals = append(evals, s)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	rep := rs.wait(t)
	if rep.Kind != CmdEvaluate || rep.Err != nil || rep.Eval == nil || rep.Eval.Tasks != 20 || rep.Iter != 5 {
		t.Fatalf("reply %+v", rep)
	}
	if len(evals) != 2 || evals[0].Done || evals[0].Iter != 5 || evals[0].Eval.Mean != rep.Eval.Mean || !evals[1].Done {
		t.Fatalf("want one mid-run eval snapshot at 5 then the final one, got %+v", evals)
	}
	if res.Eval.Tasks != cfg.EvalTasks {
		t.Fatalf("final evaluation used %d tasks", res.Eval.Tasks)
	}
	a := testutil.ReadFile(t, filepath.Join(plain, FileMetrics))
	b := testutil.ReadFile(t, filepath.Join(evald, FileMetrics))
	if !bytes.Equal(a, b) {
		t.Fatalf("evaluating mid-run changed training:\n%s\n---\n%s", a, b)
	}
}

// While paused no iteration runs, commands are still served, pause time
// is not training time, and resume continues the run.
func TestControlPauseServesCommandsAndResumes(t *testing.T) {
	dir := t.TempDir()
	ch := make(chan Command, 4)
	rs := newReplies()
	var iter atomic.Int64
	var mu sync.Mutex
	var pausedEval *Snapshot
	var sent bool // touched by the run's goroutine only
	cfg := tinyConfig("vrf", 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	t0 := time.Now()
	go func() {
		res, err := Run(ctx, cfg, sineLike{}, controlOpts(dir, ch), ObserverFunc(func(s Snapshot) error {
			if s.Eval != nil && !s.Done {
				mu.Lock()
				pausedEval = &s
				mu.Unlock()
				return nil
			}
			iter.Store(int64(s.Iter))
			if s.Iter == 3 && !sent {
				sent = true
				ch <- Command{Kind: CmdPause, Reply: rs.reply}
			}
			return nil
		}))
		done <- result{res, err}
	}()
	if rep := rs.wait(t); rep.Kind != CmdPause || rep.Iter != 3 {
		t.Fatalf("pause reply %+v", rep)
	}
	const pause = 400 * time.Millisecond
	time.Sleep(pause)
	if got := iter.Load(); got != 3 {
		t.Fatalf("training went on while paused: iteration %d", got)
	}
	ch <- Command{Kind: CmdCheckpoint, Reply: rs.reply}
	if rep := rs.wait(t); rep.Kind != CmdCheckpoint || rep.Iter != 3 || rep.Err != nil {
		t.Fatalf("checkpoint while paused: %+v", rep)
	}
	if ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint)); err != nil || ck.Iter != 3 {
		t.Fatalf("checkpoint while paused: %+v %v", ck, err)
	}
	ch <- Command{Kind: CmdEvaluate, Tasks: 10, Reply: rs.reply}
	if rep := rs.wait(t); rep.Eval == nil || rep.Eval.Tasks != 10 {
		t.Fatalf("evaluate while paused: %+v", rep)
	}
	mu.Lock()
	if pausedEval == nil || pausedEval.Iter != 3 {
		t.Fatalf("no eval snapshot while paused: %+v", pausedEval)
	}
	mu.Unlock()
	ch <- Command{Kind: CmdResume, Reply: rs.reply}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.Iters != cfg.Iters || iter.Load() != int64(cfg.Iters) {
		t.Fatalf("resumed run stopped at %d", r.res.Iters)
	}
	if wall := time.Since(t0).Seconds(); r.res.TrainSeconds > wall-pause.Seconds()+0.05 {
		t.Fatalf("training time %.3fs includes the %v pause (wall %.3fs)", r.res.TrainSeconds, pause, wall)
	}
}

// Cancelling a paused run stops it at once, with a checkpoint.
func TestControlCancelWhilePaused(t *testing.T) {
	dir := t.TempDir()
	ch := make(chan Command, 1)
	rs := newReplies()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-rs.ch
		cancel()
	}()
	res, err := Run(ctx, tinyConfig("rff", 1000), sineLike{}, controlOpts(dir, ch), ObserverFunc(func(s Snapshot) error {
		if s.Iter == 2 {
			ch <- Command{Kind: CmdPause, Reply: rs.reply}
		}
		return nil
	}))
	if !errors.Is(err, context.Canceled) || !res.Interrupted || res.Iters != 2 {
		t.Fatalf("want an interrupted run at 2, got %d, %v", res.Iters, err)
	}
	if ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint)); err != nil || ck.Iter != 2 {
		t.Fatalf("checkpoint %+v, %v", ck, err)
	}
}

// Switching the display task draws the new task at once and keeps it for
// the periodic display snapshots; the task is the same one a run started
// on it shows.
func TestControlDisplayTask(t *testing.T) {
	cfg := tinyConfig("vrf", 9) // display snapshots at 1 and 7
	var want []float64
	if _, err := Run(context.Background(), cfg, sineLike{}, RunOptions{DisplayTask: 3, SkipEval: true}, ObserverFunc(func(s Snapshot) error {
		if s.Display != nil && want == nil {
			want = s.Display.Truth
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	ch := make(chan Command, 1)
	var truths [][]float64
	var iters []int
	opts := controlOpts("", ch)
	opts.SkipEval = true
	if _, err := Run(context.Background(), cfg, sineLike{}, opts, ObserverFunc(func(s Snapshot) error {
		if s.Display != nil {
			truths = append(truths, s.Display.Truth)
			iters = append(iters, s.Iter)
		}
		if s.Iter == 2 && s.Display == nil {
			ch <- Command{Kind: CmdDisplayTask, Task: 3}
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(iters, []int{1, 2, 7, 9}) {
		t.Fatalf("display snapshots at %v, want [1 2 7 9]", iters)
	}
	if slices.Equal(truths[0], want) {
		t.Fatal("display task 0 and 3 are the same task")
	}
	for i, tr := range truths[1:] {
		if !slices.Equal(tr, want) {
			t.Fatalf("display %d (iteration %d) is not task 3", i+1, iters[i+1])
		}
	}
}

// A closed control channel is the same as none, even while paused.
func TestControlClosedChannel(t *testing.T) {
	ch := make(chan Command, 1)
	ch <- Command{Kind: CmdPause}
	close(ch)
	res, err := Run(context.Background(), tinyConfig("rbf", 4), sineLike{}, RunOptions{Control: ch, SkipEval: true}, nil)
	if err != nil || res.Iters != 4 {
		t.Fatalf("run with a closed control channel: %d iterations, %v", res.Iters, err)
	}
}
