package engine

// Resuming a run directory: what a resume reads and checks before it
// trains, and what it refuses, so that nothing the run recorded is lost.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mkbench/mkbench/internal/runfile"
)

// recordIters writes a resumed run's new iteration budget into its
// config.json, which says what the run trains to (the learning-rate
// schedule's length, the runs browser's iters, an exported model's
// settings); the checkpoint records it at its next save.
func recordIters(dir string, ck *Checkpoint, iters int) error {
	rc, err := ReadRunConfig(dir)
	if err != nil || rc.Config.Iters == 0 {
		rc = RunConfig{Preset: ck.Preset, Source: ck.Source, Config: ck.Config} // config.json lost: the checkpoint has it
	}
	rc.Config.Iters = iters
	return runfile.WriteJSON(filepath.Join(dir, FileConfig), rc, runfile.Private)
}

// restart settles the resume of a run directory that has no checkpoint:
// a run stopped before its first one. Its config.json is started from
// iteration 0 (the files it left are moved aside by newDir). A directory
// whose run got further — it validated (best.gob) or finished
// (summary.json), so its checkpoint was lost, not never written — is
// refused unless RunOptions.StartOver says to start over all the same.
func (r *run) restart(cfg Config) (*run, error) {
	dir := r.opts.Dir
	if !r.opts.StartOver {
		for _, f := range []string{FileSummary, FileBest} {
			if fileExists(filepath.Join(dir, f)) {
				return nil, fmt.Errorf("engine: %s has no %s to resume from, but its %s shows the run got further: nothing was changed; evaluate its best parameters with mkbench eval --run %s, or start it over with --resume %s --start-over, which moves its files aside into %s/%s-TIME",
					dir, FileCheckpoint, f, dir, dir, dir, asidePrefix)
			}
		}
	}
	rc, err := ReadRunConfig(dir)
	if err != nil {
		return nil, err
	}
	if rc.Source != "" && rc.Source != r.src.Name() {
		return nil, fmt.Errorf("engine: %s was a run on %q, not %q", dir, rc.Source, r.src.Name())
	}
	iters := cfg.Iters
	cfg = rc.Config
	if iters > 0 {
		cfg.Iters = iters
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %s: %w", filepath.Join(dir, FileConfig), err)
	}
	if r.opts.Preset == "" {
		r.opts.Preset = rc.Preset
	}
	r.cfg, r.fresh = cfg, true
	r.res.note("%s has no checkpoint (the run was stopped before its first one): starting its config.json over from iteration 0", dir)
	return r, nil
}

// checkBest checks, before a resumed run trains, that the best.gob its
// checkpoint relies on can be read: a missing one is rebuilt from the next
// validation (noted), a damaged one is refused (with Repair: moved aside
// and rebuilt).
func (r *run) checkBest() error {
	ck, dir := r.from, r.opts.Dir
	if ck.BestIter == 0 {
		return nil
	}
	path := filepath.Join(dir, FileBest)
	_, err := LoadCheckpoint(path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist) || !fileExists(path):
		r.res.note("%s is missing: the best validation (iteration %d) is forgotten and best.gob is rebuilt from the next validation", path, ck.BestIter)
	case r.opts.Repair:
		if rerr := os.Rename(path, path+damagedSuffix); rerr != nil {
			return fmt.Errorf("engine: moving the damaged %s aside: %w", path, rerr)
		}
		r.res.note("%s was damaged (%v): moved to %s.damaged; best.gob is rebuilt from the next validation", path, err, FileBest)
	default:
		return fmt.Errorf("%w (checked before training, so nothing was changed)", err)
	}
	ck.BestVal, ck.BestIter, ck.BestEval = 0, 0, nil
	return nil
}

// traceOfStart notes what of dir exists before Run takes its lock, and
// returns what undoes the trace a refused start would leave: the lock
// file if Run made it (removed while still held, lock nil: no lock was
// taken), and dir itself if Run made it and it is empty again.
func traceOfStart(dir string) func(lock *runfile.DirLock) {
	var made []string // the folders Lock will create, deepest first
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	_, lerr := os.Lstat(filepath.Join(dir, runfile.FileLock))
	madeLock := errors.Is(lerr, fs.ErrNotExist)
	return func(lock *runfile.DirLock) {
		if madeLock && lock != nil {
			lock.Remove()
		} else {
			lock.Release()
		}
		for _, d := range made {
			if os.Remove(d) != nil { // only an empty one
				break
			}
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// completeSummary returns dir's summary.json when it is the complete
// summary of the run checkpointed as ck.
func completeSummary(dir string, ck *Checkpoint) (*Summary, bool) {
	data, err := runfile.ReadBounded(filepath.Join(dir, FileSummary), runfile.MaxSmallJSON)
	if err != nil {
		return nil, false
	}
	var sum Summary
	if json.Unmarshal(data, &sum) != nil || sum.Eval == nil || sum.Iters != ck.Iter || sum.Final.Iter != ck.Iter ||
		sum.Seed != ck.Config.Seed || sum.Variant != ck.Config.Variant() {
		return nil, false
	}
	return &sum, true
}
