package presets

import (
	"strings"

	"github.com/mkbench/mkbench/engine"
)

// EvaluateModel evaluates checkpoint ck's model, with the config it holds,
// on n tasks of srcs' test split (on each test source, and their mean,
// when srcs has several), with the config's queries, draws and seed: what
// `mkbench eval` reports. The model is built on srcs.Train. progress, when
// not nil, is told after each meta-batch how many tasks are done.
func EvaluateModel(ck *engine.Checkpoint, srcs Sources, n int, progress func(done, total int)) (engine.EvalResult, map[string]*engine.EvalResult, error) {
	m, err := ck.Model(srcs.Train)
	if err != nil {
		return engine.EvalResult{}, nil, err
	}
	defer m.Close()
	m.EvalProgress = progress
	c := ck.Config
	if len(srcs.TestBy) > 0 {
		return m.EvaluateSources(srcs.TestBy, n, c.EvalQuery, c.EvalSamples, c.Seed)
	}
	test := srcs.Test
	if test == nil {
		test = srcs.Train
	}
	res, err := m.EvaluateOn(test, n, c.EvalQuery, c.EvalSamples, c.Seed)
	return res, nil, err
}

// EvaluateRun re-evaluates run directory dir as `mkbench eval --run DIR`
// does with its defaults, under the run's lock: its best-validation
// parameters (or the last, note saying so) on its test split, reading
// the data folder the run recorded (or data, when it recorded none).
// progress is as EvaluateModel's.
func EvaluateRun(dir, data string, progress func(done, total int)) (res engine.EvalResult, note string, err error) {
	lock, roNote, err := engine.LockRunToRead(dir)
	if err != nil {
		return res, "", err
	}
	defer lock.Release()
	ck, _, note, err := engine.LoadEvalCheckpoint(dir)
	if roNote != "" {
		note = strings.TrimPrefix(strings.Join([]string{note, roNote}, "; "), "; ")
	}
	if err != nil {
		return res, note, err
	}
	if rc, err := engine.ReadRunConfig(dir); err == nil && rc.Data != "" {
		data = rc.Data
	}
	ck.Config.ClearTrainingShape()
	srcs, err := NewSources(ck.Source, ck.Config, data)
	if err != nil {
		return res, note, err
	}
	res, _, err = EvaluateModel(ck, srcs, ck.Config.EvalTasks, progress)
	return res, note, err
}
