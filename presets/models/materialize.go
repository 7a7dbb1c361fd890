package models

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/engine/runfile"
)

// Materialize writes model name as an ordinary run directory dir: its
// parameters as best.gob, config.json, a summary.json whose eval is the
// model's recorded test result, and its curves. Whatever reads run
// directories (the versatility experiment, the workbench) then reads the
// model. A dir already holding this model (the same model.mkbm) is kept
// as it is; one holding anything else is refused.
func (l Library) Materialize(name, dir string) error {
	ck, info, err := l.Open(name)
	if err != nil {
		return err
	}
	data, err := fs.ReadFile(l.fsys, path.Join(name, FileModel))
	if err != nil {
		return err
	}
	mark := filepath.Join(dir, FileModel)
	if old, err := os.ReadFile(mark); err == nil {
		if bytes.Equal(old, data) {
			return nil
		}
		return fmt.Errorf("models: %s holds another model; remove it or choose another folder", dir)
	} else if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		return fmt.Errorf("models: %s is not empty and holds no model; remove it or choose another folder", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := ck.Save(filepath.Join(dir, engine.FileBest)); err != nil {
		return err
	}
	if err := runfile.WriteJSON(filepath.Join(dir, engine.FileConfig), engine.RunConfig{Preset: ck.Preset, Source: ck.Source, Config: ck.Config}, 0o644); err != nil {
		return err
	}
	test := info.Test
	sum := engine.Summary{Preset: ck.Preset, Variant: ck.Config.Variant(), Source: ck.Source, Seed: ck.Config.Seed, Iters: info.Iters,
		TrainSeconds: info.TrainSeconds, Eval: &test, EvalCheckpoint: "best", BestIter: info.BestIter, BestVal: ck.BestEval,
		Params: info.Params, Finished: info.Exported, Config: ck.Config}
	if info.Iters > 0 {
		sum.MsPerIter = 1000 * info.TrainSeconds / float64(info.Iters)
	}
	if err := runfile.WriteJSON(filepath.Join(dir, engine.FileSummary), sum, 0o644); err != nil {
		return err
	}
	metrics, val, err := l.Curves(name)
	if err != nil {
		return err
	}
	for f, b := range map[string][]byte{engine.FileMetrics: metrics, engine.FileVal: val} {
		if b != nil {
			if err := runfile.WriteAtomic(filepath.Join(dir, f), b, 0o644); err != nil {
				return err
			}
		}
	}
	// Last: the mark that dir holds this model.
	return runfile.WriteAtomic(mark, data, 0o644)
}

// RunDir is where model name is materialized under runs root root: the
// folder the versatility experiment and the workbench read it from.
func RunDir(root, name string) string { return filepath.Join(root, "models", name) }
