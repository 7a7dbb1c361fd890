package models

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
)

// Materialize writes model name as an ordinary run directory dir: its
// parameters as best.gob, config.json, a summary.json whose eval is the
// model's recorded test result, and its curves. Whatever reads run
// directories (the versatility experiment, the workbench) then reads the
// model. A dir already holding this model (the same model.mkbm) is kept
// as it is. A dir holding another model — an earlier version of it, which
// a newer mkbench ships retrained, or another library's model of the same
// name — is moved aside to a free sibling DIR.replaced-TIME (TIME: when
// it was written), whose path aside returns, so the model asked for opens
// and nothing written before is lost. A non-empty dir holding no model is
// refused.
func (l Library) Materialize(name, dir string) (aside string, err error) {
	ck, info, err := l.Open(name)
	if err != nil {
		return "", err
	}
	data, err := l.modelFile(name)
	if err != nil {
		return "", err
	}
	metrics, val, err := l.Curves(name)
	if err != nil {
		return "", err
	}
	// Written whole or not at all, as an export's model folder is: into a
	// hidden sibling renamed into place, under the parent folder's lock.
	parent := filepath.Dir(dir)
	lock, err := lockLibrary(parent)
	if err != nil {
		return "", err
	}
	defer lock.Remove()
	mark := filepath.Join(dir, FileModel)
	old, err := runfile.ReadBounded(mark, MaxModelBytes)
	switch {
	case err == nil && bytes.Equal(old, data):
		return "", nil
	case err == nil || fileExists(mark):
		// another model: moved aside below, once the new one is written
	default:
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			return "", fmt.Errorf("models: %s is not empty and holds no model; remove it or choose another folder", dir)
		}
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return "", fmt.Errorf("models: %w", err)
	}
	defer os.RemoveAll(tmp) // made here, holding only what is written below; gone once renamed
	if err := ck.Save(filepath.Join(tmp, engine.FileBest)); err != nil {
		return "", err
	}
	if err := runfile.WriteJSON(filepath.Join(tmp, engine.FileConfig), engine.RunConfig{Preset: ck.Preset, Source: ck.Source, Config: ck.Config}, 0o644); err != nil {
		return "", err
	}
	// A model of a run that did not validate is its last parameters: the
	// summary says so as that run's did, with no best iteration.
	test, which, bestIter := info.Test, "best", info.BestIter
	if info.Last {
		which, bestIter = "last", 0
	}
	sum := engine.Summary{Preset: ck.Preset, Variant: ck.Config.Variant(), Source: ck.Source, Seed: ck.Config.Seed, Iters: info.Iters,
		TrainSeconds: info.TrainSeconds, Eval: &test, EvalCheckpoint: which, BestIter: bestIter, BestVal: ck.BestEval,
		Params: info.Params, Finished: info.Exported, Config: ck.Config}
	if info.Iters > 0 {
		sum.MsPerIter = 1000 * info.TrainSeconds / float64(info.Iters)
	}
	if err := runfile.WriteJSON(filepath.Join(tmp, engine.FileSummary), sum, 0o644); err != nil {
		return "", err
	}
	for f, b := range map[string][]byte{engine.FileMetrics: metrics, engine.FileVal: val, FileModel: data} {
		if b != nil {
			if err := runfile.WriteAtomic(filepath.Join(tmp, f), b, 0o644); err != nil {
				return "", err
			}
		}
	}
	if fileExists(mark) {
		if aside, err = moveAside(dir, mark); err != nil {
			return "", err
		}
	} else {
		os.Remove(dir) // empty, checked above
	}
	if err := os.Rename(tmp, dir); err != nil {
		return aside, fmt.Errorf("models: %s could not be put in place: %w", dir, err)
	}
	return aside, nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// moveAside renames dir, which holds another model (its mark), to the
// first free DIR.replaced-TIME[-N], TIME the mark's modification time.
func moveAside(dir, mark string) (string, error) {
	st, err := os.Stat(mark)
	if err != nil {
		return "", err
	}
	base := dir + ".replaced-" + st.ModTime().UTC().Format("20060102T150405Z")
	to := base
	for n := 2; ; n++ {
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = fmt.Sprintf("%s-%d", base, n)
	}
	if err := os.Rename(dir, to); err != nil {
		return "", fmt.Errorf("models: %s holds another model and could not be moved aside (%w); remove it or choose another folder", dir, err)
	}
	return to, nil
}

// RunDir is where model name is materialized under runs root root: the
// folder the versatility experiment and the workbench read it from.
func RunDir(root, name string) string { return filepath.Join(root, "models", name) }
