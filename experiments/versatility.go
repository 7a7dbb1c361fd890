package experiments

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/presets"
)

// gridCells is the versatility grid of o for a model trained at key's
// setting: every evaluation shot, by every way for classification.
func gridCells(o Options, key PointKey) []PointKey {
	var out []PointKey
	for _, k := range o.Shots {
		if len(o.Ways) == 0 {
			out = append(out, PointKey{Variant: key.Variant, Bases: key.Bases, TrainShot: key.TrainShot, Shot: k})
			continue
		}
		for _, w := range o.Ways {
			out = append(out, PointKey{Variant: key.Variant, Bases: key.Bases, TrainWay: key.TrainWay, TrainShot: key.TrainShot, Way: w, Shot: k})
		}
	}
	return out
}

// loadEvalCheckpoint loads the checkpoint a run's summary was evaluated
// with (see evalCheckpoint).
func loadEvalCheckpoint(dir string) (*engine.Checkpoint, error) {
	path, _ := evalCheckpoint(dir)
	return engine.LoadCheckpoint(path)
}

// evalRow is one line of evals.jsonl: a finished versatility cell.
type evalRow struct {
	Key    string     `json:"key"`
	Result SeedResult `json:"result"`
}

// loadEvals reads the finished cells of evals.jsonl by key. A line cut
// short by a crash is skipped: its cell is evaluated again.
func loadEvals(path string) (map[string]SeedResult, error) {
	rows, err := runfile.Read[evalRow](path)
	if err != nil {
		return nil, err
	}
	out := map[string]SeedResult{}
	for _, row := range rows {
		if row.Key != "" {
			out[row.Key] = row.Result
		}
	}
	return out, nil
}

// imagesPerClass is how many examples each class of a classification
// family has, which bounds shot + query; 0 means no bound known.
func imagesPerClass(family string) int {
	if family == "omniglot" {
		return datasets.OmniglotDrawings
	}
	return 0
}

// classLimit is the number of classes of the smallest split of a
// classification family (presets.NewSources draws from all three), which
// bounds the way; 0 for regression.
func classLimit(family, data string) (int, string, error) {
	if family != "omniglot" {
		return 0, "", nil
	}
	if data == "" {
		data = datasets.DefaultOmniglotDir()
	}
	o, err := datasets.LoadOmniglot(data, datasets.OmniglotOptions{})
	if err != nil {
		return 0, "", err
	}
	limit, name := 0, ""
	for _, s := range []string{"train", "val", "test"} {
		set, err := o.Split(s)
		if err != nil {
			return 0, "", err
		}
		if limit == 0 || set.NumClasses() < limit {
			limit, name = set.NumClasses(), s
		}
	}
	return limit, name, nil
}

// evalCells evaluates a trained model on the versatility grid: for each
// cell a copy of its config with the cell's way and shot (and the query
// counts cut so that shot + query images exist per class), sources built
// for it, and Checkpoint.Model + EvaluateOn on the test source. Finished
// cells are appended to evals.jsonl and taken from evals on a rerun;
// cells the data cannot hold are skipped with a note.
func (r *Runner) evalCells(ctx context.Context, pr Progress, dir string, j job, o Options, res *Results, evals map[string]SeedResult) error {
	ck, err := loadEvalCheckpoint(dir)
	if err != nil {
		return err
	}
	_, which := evalCheckpoint(dir)
	family := ck.Source
	var limit int
	var limitSplit string
	if ck.Config.Classify() {
		if limit, limitSplit, err = classLimit(family, o.Data); err != nil {
			return err
		}
	}
	if c := ck.Config; c.Classify() && (c.TrainingWay() != c.Way || c.TrainingShot() != c.Shot) {
		// The grid's "trained" setting (†) is the one the model was
		// validated and selected at; its training episodes were another
		// shape, which a reader comparing with the paper must see.
		res.noteOnce(fmt.Sprintf("`%s` was trained on %s episodes (train_way, train_shot) and validated at %s, the setting marked †",
			j.name, WayShot(c.TrainingWay(), c.TrainingShot()), WayShot(c.Way, c.Shot)))
	}
	if r := ck.Config.EvalSupportShift; r > 0 {
		// An evaluation choice of the model (chosen after its training),
		// which every cell uses and a reader comparing grids must see.
		res.noteOnce(fmt.Sprintf("`%s` is tested in every cell with each support image joined by its %d copies shifted by up to %d pixels (eval_support_shift %d)",
			j.name, ck.Config.EvalShifts()-1, r, r))
	}
	tasks := j.cfg.EvalTasks
	// The pace is the whole run's: the best-validation parameters may be
	// from an iteration before its last, and the run's time counts all.
	trainSec, trainIters := ck.TrainSeconds, ck.Iter
	var s engine.Summary
	if readJSON(filepath.Join(dir, engine.FileSummary), &s) == nil && s.Iters > 0 {
		trainSec, trainIters = s.TrainSeconds, s.Iters
	}
	for _, cell := range j.cells {
		if limit > 0 && cell.Way > limit {
			res.noteOnce(fmt.Sprintf("%d-way cells skipped: the %s split has %d classes", cell.Way, limitSplit, limit))
			continue
		}
		cfg := ck.Config
		cfg.EmbedHidden = slices.Clone(cfg.EmbedHidden)
		cfg.ClearTrainingShape() // a cell only evaluates, at its own way and shot
		if cell.Way > 0 {
			cfg.Way = cell.Way
		}
		cfg.Shot = cell.Shot
		if n := imagesPerClass(family); n > 0 {
			if cell.Shot >= n {
				res.noteOnce(fmt.Sprintf("%d-shot cells skipped: classes have %d examples, none left for queries", cell.Shot, n))
				continue
			}
			cfg.Query, cfg.EvalQuery = min(cfg.Query, n-cell.Shot), min(cfg.EvalQuery, n-cell.Shot)
		}
		key := fmt.Sprintf("%s|%s|way%d|shot%d|tasks%d|query%d|samples%d|seed%d|iter%d", dir, which, cell.Way, cell.Shot, tasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed, ck.Iter)
		sr, done := evals[key]
		q := pr
		q.Key = cell
		if !done {
			if err := ctx.Err(); err != nil {
				return err
			}
			q.Phase = PhaseEval
			r.report(q)
			ev, err := evaluateCell(ctx, ck, cfg, family, o.Data, tasks)
			if err != nil {
				return fmt.Errorf("%s at %s: %w", j.name, cell.Setting(), err)
			}
			sr = SeedResult{Seed: cfg.Seed, Mean: ev.Mean, CI95: ev.CI95, Tasks: ev.Tasks, Query: ev.Query, Iters: ck.Iter,
				TrainSeconds: trainSec, RunDir: j.name, EvalCheckpoint: which}
			if trainIters > 0 {
				sr.MsPerIter = 1000 * trainSec / float64(trainIters)
			}
			evals[key] = sr
			if err := runfile.Append(filepath.Join(r.Dir, FileEvals), evalRow{Key: key, Result: sr}, runfile.Shared); err != nil {
				return err
			}
		}
		res.add(cell, res.Metric, sr)
		q.Phase, q.Result = PhaseDone, &sr
		r.report(q)
	}
	return nil
}

// noteOnce adds note to the results' notes unless it is there already.
func (r *Results) noteOnce(note string) {
	if !slices.Contains(r.Notes, note) {
		r.Notes = append(r.Notes, note)
	}
}

// evaluateCell evaluates ck's parameters with config cfg (another way or
// shot) on the test source of family. The evaluation runs in its own
// goroutine so that a cancelled ctx returns at once: a large cell can take
// minutes, and an interrupted one is simply evaluated again on resume.
func evaluateCell(ctx context.Context, ck *engine.Checkpoint, cfg engine.Config, family, data string, tasks int) (engine.EvalResult, error) {
	// A cell at many ways and shots is a larger model than the one trained:
	// refuse it before allocating, as mkbench eval does.
	if err := presets.CheckMemory("the cell", family, cfg, engine.Config.EvalMemoryEstimate, nil); err != nil {
		return engine.EvalResult{}, err
	}
	srcs, err := presets.NewSources(family, cfg, data)
	if err != nil {
		return engine.EvalResult{}, err
	}
	c := *ck
	c.Config = cfg
	m, err := c.Model(srcs.Train)
	if err != nil {
		return engine.EvalResult{}, err
	}
	test := srcs.Test
	if test == nil {
		test = srcs.Train
	}
	type out struct {
		ev  engine.EvalResult
		err error
	}
	ch := make(chan out, 1)
	go func() {
		defer m.Close()
		ev, err := m.EvaluateOn(test, tasks, cfg.EvalQuery, cfg.EvalSamples, cfg.Seed)
		ch <- out{ev, err}
	}()
	select {
	case o := <-ch:
		return o.ev, o.err
	case <-ctx.Done():
		return engine.EvalResult{}, ctx.Err()
	}
}
