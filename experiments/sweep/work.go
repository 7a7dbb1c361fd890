package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/runstate"
	"github.com/mkbench/mkbench/presets"
)

// Outcomes of Work besides a nil error.
var (
	// ErrFailed: the unit failed and its failed.json says why.
	ErrFailed = errors.New("sweep: unit failed")
	// ErrInterrupted: the context ended the unit after a checkpoint; a
	// worker started again continues it.
	ErrInterrupted = errors.New("sweep: unit interrupted")
	// ErrCancelled: the sweep was cancelled (mkbench sweep cancel), so
	// the worker did not start the unit.
	ErrCancelled = errors.New("sweep: cancelled")
)

// maxStalls is how many starts in a row from the same checkpoint a unit
// may have before it is failed: a unit killed before it ever checkpoints
// again (a node that dies at once, a time limit shorter than the first
// checkpoint) would otherwise be requeued forever.
const maxStalls = 5

// maxDeaths is how many times in a row a unit's worker may die (a signal,
// the out-of-memory killer, a crash, a node that stops) before the unit is
// failed for good: once is a node failure or a kill that a requeue or
// sweep resume mends from the checkpoint; three times is a unit that kills
// its worker, and running it again would kill it again.
const maxDeaths = 3

// BaselineFunc trains a unit whose variant is a baseline (MAML) into its
// run directory, leaving a summary.json as the engine's.
type BaselineFunc func(ctx context.Context, m Manifest, u Unit, dir string) error

// Worker runs units of the sweep in Dir, one per call of Work.
type Worker struct {
	Dir string
	// LockWait is how long Work waits for a unit another live worker
	// holds (a requeued task whose old self still runs on a failed node)
	// before giving up; default 10 minutes.
	LockWait time.Duration
	// Baselines run the units of baseline variants, by variant name.
	Baselines map[string]BaselineFunc
	// Log receives one line when the unit starts and ends and a progress
	// line every ProgressEvery (default 30s); nil: nothing.
	Log           io.Writer
	ProgressEvery time.Duration
}

// Work runs unit index: it trains it, resumes its checkpoint, or returns
// at once when it is finished. It holds the unit directory's lock
// throughout, waiting for another worker that holds it (LockWait); a dead
// owner's lock is free at once (runfile.Lock). A failure a retry cannot
// fix — bad settings or data, a diverged loss, no progress over
// maxStalls starts — writes the unit's failed.json, which later workers
// honour until sweep resume --retry-failed clears it. A worker records
// its start in starts.jsonl and its end in ends.jsonl, so one that dies
// without a word shows as died (UnitOf); after maxDeaths such deaths in a
// row the unit is failed for good.
func (w *Worker) Work(ctx context.Context, index int) error {
	m, err := Load(w.Dir)
	if err != nil {
		return err
	}
	if index < 0 || index >= len(m.Units) {
		return fmt.Errorf("sweep: no unit %d in %s (it has %d, indexed 0 to %d)", index, w.Dir, len(m.Units), len(m.Units)-1)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, FileCancelled)); err == nil {
		return fmt.Errorf("%w: %s was cancelled; start its unfinished units again with mkbench sweep resume %s", ErrCancelled, w.Dir, w.Dir)
	}
	u := m.Units[index]
	dir := filepath.Join(w.Dir, u.Dir)
	if err := notLinked(filepath.Dir(dir), dir); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrFailed, u.Name, err) // no failed.json: it would land beyond the link
	}
	lock, err := w.lock(ctx, dir)
	if err != nil {
		return err
	}
	defer lock.Release()

	if _, err := os.Stat(filepath.Join(dir, engine.FileSummary)); err == nil {
		w.logf("%s: finished earlier; nothing to do", u.Name)
		return nil
	}
	f, failed := engine.ReadFailure(dir)
	if failed && f.Permanent {
		return fmt.Errorf("%w: %s: %s (not retried; after fixing the cause run mkbench sweep resume %s --retry-failed)", ErrFailed, u.Name, f.Error, w.Dir)
	}
	if h := readHistory(dir); h.died != nil && h.deaths >= maxDeaths {
		last := diedReason(*h.died, h.died.Iter, "")
		if failed {
			last = f.Error // the reason its parent saw
		}
		return w.fail(dir, u, fmt.Errorf("its worker died %d times in a row, the last: %s; it is not started again (does it run out of memory? lower eval_tasks, meta_batch or bases, or give it more memory)", h.deaths, last), h.died.Iter, true)
	}
	os.Remove(filepath.Join(dir, FileFailed))
	row, iter, err := w.recordStart(dir)
	if err != nil {
		return err
	}
	// Not deferred: a panic that ends the process must leave no end, so
	// the unit shows its worker died.
	err = w.started(ctx, m, u, dir, iter)
	w.recordEnd(dir, row, err)
	return err
}

// started runs unit u once its start is recorded, from iteration iter.
func (w *Worker) started(ctx context.Context, m Manifest, u Unit, dir string, iter int) error {
	if h := readHistory(dir); h.stalled >= maxStalls {
		return w.fail(dir, u, fmt.Errorf("started %d times in a row at iteration %d without saving a later checkpoint (is the time limit shorter than the first checkpoint, or does the node die at start?)", h.stalled, iter), iter, true)
	}
	if bf, ok := w.Baselines[u.Variant]; ok {
		w.logf("%s: training the %s baseline", u.Name, u.Variant)
		if err := bf(ctx, m, u, dir); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %s: %v", ErrInterrupted, u.Name, err)
			}
			return w.fail(dir, u, err, 0, true)
		}
		w.logf("%s: done", u.Name)
		return nil
	}
	return w.train(ctx, m, u, dir, iter)
}

// train runs the engine on a unit, resuming what the directory holds.
func (w *Worker) train(ctx context.Context, m Manifest, u Unit, dir string, iter int) error {
	p, cfg, err := presets.CheckedConfig(u.Spec())
	if err != nil {
		return w.fail(dir, u, err, 0, true)
	}
	budget, err := engine.MinutesBudget(u.Minutes) // the sweep file's, checked when it was read
	if err != nil {
		return w.fail(dir, u, err, 0, true)
	}
	srcs, err := presets.NewSources(p.Source, cfg, m.Data)
	if err != nil {
		return w.fail(dir, u, err, 0, true)
	}
	resume := exists(filepath.Join(dir, engine.FileCheckpoint)) || exists(filepath.Join(dir, engine.FileConfig))
	if resume {
		w.logf("%s: resuming at iteration %d of %d", u.Name, iter, cfg.Iters)
	} else {
		w.logf("%s: training %s, variant %s, seed %d, %d iterations", u.Name, u.RecordedPreset(), cfg.Variant(), cfg.Seed, cfg.Iters)
	}
	opts := engine.RunOptions{Preset: u.RecordedPreset(), Dir: dir, Resume: resume, Locked: true, Val: srcs.Val, Test: srcs.Test, TestBySource: srcs.TestBy,
		Budget: budget, ReportEvery: time.Second, Data: m.Data}
	res, err := engine.Run(ctx, cfg, srcs.Train, opts, w.progress(u))
	for _, n := range res.Notes {
		w.logf("%s: note: %s", u.Name, n)
	}
	switch {
	case err == nil && res.Interrupted:
		return fmt.Errorf("%w: %s at iteration %d", ErrInterrupted, u.Name, res.Iters)
	case err == nil:
		w.logf("%s: done: %d iterations in %.1fs; eval %s", u.Name, res.Iters, res.TrainSeconds, res.Eval)
		return nil
	case res.Interrupted || ctx.Err() != nil:
		return fmt.Errorf("%w: %s at iteration %d (checkpoint saved)", ErrInterrupted, u.Name, res.Iters)
	}
	return w.fail(dir, u, err, res.Iters, engine.Permanent(err))
}

// fail writes the unit's failed.json (err at iteration iter) and returns
// ErrFailed with err.
func (w *Worker) fail(dir string, u Unit, err error, iter int, perm bool) error {
	if werr := engine.WriteFailure(dir, err, iter, perm); werr != nil {
		return fmt.Errorf("%w: %s: %v; and its failed.json could not be written: %v", ErrFailed, u.Name, err, werr)
	}
	w.logf("%s: failed: %v", u.Name, err)
	return fmt.Errorf("%w: %s: %v", ErrFailed, u.Name, err)
}

// lock takes the unit directory's lock, waiting up to LockWait while a
// live worker holds it.
func (w *Worker) lock(ctx context.Context, dir string) (*runfile.DirLock, error) {
	wait := w.LockWait
	if wait <= 0 {
		wait = 10 * time.Minute
	}
	deadline := time.Now().Add(wait)
	logged := false
	for {
		l, err := runfile.Lock(dir)
		if err == nil || !errors.Is(err, runfile.ErrInUse) || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("sweep: %w", err)
			}
			return l, nil
		}
		if !logged {
			w.logf("waiting for %v", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: while waiting for %s", ErrInterrupted, dir)
		case <-time.After(time.Second):
		}
	}
}

// recordStart appends this start to starts.jsonl and returns its row
// and the iteration the unit's checkpoint holds (0 without one).
func (w *Worker) recordStart(dir string) (row, iter int, err error) {
	if exists(filepath.Join(dir, engine.FileCheckpoint)) {
		ck, err := engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
		if err != nil {
			return 0, 0, err
		}
		iter = ck.Iter
	}
	starts, err := runfile.Read[Start](filepath.Join(dir, FileStarts))
	if err != nil {
		return 0, 0, err
	}
	host, _ := os.Hostname()
	restart, _ := strconv.Atoi(os.Getenv("SLURM_RESTART_COUNT"))
	s := Start{Time: time.Now().UTC(), Host: host, PID: os.Getpid(), Job: runfile.SlurmJob(), Restart: restart, Iter: iter, Ends: true}
	return len(starts), iter, runfile.Append(filepath.Join(dir, FileStarts), s, runfile.Shared)
}

// recordEnd appends the end of the start at row to ends.jsonl: the worker
// lets the unit go in order, with err what Work returns.
func (w *Worker) recordEnd(dir string, row int, err error) {
	how := runstate.Finished
	switch {
	case errors.Is(err, ErrFailed):
		how = runstate.Failed
	case errors.Is(err, ErrInterrupted):
		how = runstate.Stopped
	case err != nil:
		how = "error"
	}
	if aerr := runfile.Append(filepath.Join(dir, FileEnds), End{Start: row, Time: time.Now().UTC(), How: how}, runfile.Shared); aerr != nil {
		w.logf("cannot record the end in %s: %v", FileEnds, aerr)
	}
}

// progress prints a unit's progress every ProgressEvery.
func (w *Worker) progress(u Unit) engine.Observer {
	every := w.ProgressEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	last := time.Now()
	return engine.ObserverFunc(func(s engine.Snapshot) error {
		if s.Done || time.Since(last) < every {
			return nil
		}
		last = time.Now()
		w.logf("%s: iter %d/%d  loss %.4f  kl %.3f  %s  eta %s", u.Name, s.Iter, s.Iters, s.Loss, s.KL, engine.FormatRate(s.ItersPerSec),
			engine.FormatETA(engine.Remaining(s.Iter, s.Iters, s.ItersPerSec)))
		return nil
	})
}

func (w *Worker) logf(format string, args ...any) {
	if w.Log != nil {
		fmt.Fprintf(w.Log, time.Now().Format("15:04:05")+" "+format+"\n", args...)
	}
}

// notLinked refuses a folder of the sweep that is a symbolic link: a
// sweep directory handed over could link units/NAME or logs to a folder
// of the user's, whose files a worker would then write. A missing folder
// is fine; it is made as a folder.
func notLinked(paths ...string) error {
	for _, p := range paths {
		if st, err := os.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("sweep: %s %w; a sweep writes only in folders of its own and does not follow links: remove the link", p, runfile.ErrSymlink)
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
