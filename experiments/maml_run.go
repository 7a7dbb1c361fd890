package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/engine/runfile"
)

// FileMAML is the file in a run directory that holds a MAML model.
const FileMAML = "maml.json"

// mamlFile is the on-disk form of a model. JSON keeps it readable, and Go
// writes float64s with the shortest representation that parses back to
// the same bits, so a loaded model predicts exactly as the saved one.
type mamlFile struct {
	Format       string     `json:"format"`
	Config       MAMLConfig `json:"config"`
	Iter         int        `json:"iter"`
	TrainSeconds float64    `json:"train_seconds"`
	LastLoss     float64    `json:"last_loss"`
	LastGradNorm float64    `json:"last_grad_norm"`
	Params       []float64  `json:"params"`
	AdamM        []float64  `json:"adam_m"`
	AdamV        []float64  `json:"adam_v"`
	// Window is the partial metrics row of a MAMLBaseline run.
	Window *mamlWindow `json:"metrics_window,omitempty"`
}

const mamlFormat = "mkbench-maml-1"

// mamlWindow accumulates the iterations of one metrics row; it is saved
// with the model so that a continued run writes the rows an uninterrupted
// one would.
type mamlWindow struct {
	N        int     `json:"n"`
	Loss     float64 `json:"loss"`
	GradNorm float64 `json:"grad_norm"`
}

// Save writes the model (configuration, parameters and Adam state) to
// dir/maml.json through a temporary file and a rename, so that a reader or
// a crash never leaves a half-written model.
func (m *MAMLModel) Save(dir string) error {
	f := mamlFile{
		Format: mamlFormat, Config: m.Cfg, Iter: m.Iter, TrainSeconds: m.TrainSeconds,
		LastLoss: m.LastLoss, LastGradNorm: m.LastGradNorm,
		Params: m.Params, AdamM: m.M, AdamV: m.V,
	}
	if m.window.N > 0 {
		f.Window = &m.window
	}
	return runfile.WriteJSON(filepath.Join(dir, FileMAML), f, runfile.Private)
}

// LoadMAML reads a model saved by Save from dir. Train on it continues
// exactly where the saved run stopped (after raising Cfg.Iters).
func LoadMAML(dir string) (*MAMLModel, error) {
	path := filepath.Join(dir, FileMAML)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiments: loading MAML: %w", err)
	}
	var f mamlFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("experiments: %s is damaged: %w", path, err)
	}
	if f.Format != mamlFormat {
		return nil, fmt.Errorf("experiments: %s: unknown format %q (want %q)", path, f.Format, mamlFormat)
	}
	m, err := NewMAML(f.Config)
	if err != nil {
		return nil, fmt.Errorf("experiments: %s: %w", path, err)
	}
	if len(f.Params) != len(m.Params) || len(f.AdamM) != len(m.M) || len(f.AdamV) != len(m.V) {
		return nil, fmt.Errorf("experiments: %s holds %d parameters, its config needs %d", path, len(f.Params), len(m.Params))
	}
	copy(m.Params, f.Params)
	copy(m.M, f.AdamM)
	copy(m.V, f.AdamV)
	m.Iter, m.TrainSeconds, m.LastLoss, m.LastGradNorm = f.Iter, f.TrainSeconds, f.LastLoss, f.LastGradNorm
	if f.Window != nil {
		m.window = *f.Window
	}
	return m, nil
}

// MAMLFinal is the last meta-batch's training figures.
type MAMLFinal struct {
	Iter     int     `json:"iter"`
	Loss     float64 `json:"loss"`
	Data     float64 `json:"data"` // = loss: MAML's loss is the query MSE
	LR       float64 `json:"lr"`
	GradNorm float64 `json:"grad_norm"`
}

// MAMLSummary is summary.json of a MAML run: engine.Summary's fields where
// they apply, with the MAML config in place of the engine's.
type MAMLSummary struct {
	Preset         string             `json:"preset"`  // sine-<k>shot
	Variant        string             `json:"variant"` // maml or fomaml
	Source         string             `json:"source"`
	Seed           uint64             `json:"seed"`
	Iters          int                `json:"iters"`
	TrainSeconds   float64            `json:"train_seconds"`
	MsPerIter      float64            `json:"ms_per_iter"`
	EvalSeconds    float64            `json:"eval_seconds"`
	Eval           *engine.EvalResult `json:"eval"`
	EvalCheckpoint string             `json:"eval_checkpoint"` // always "last"
	Params         int                `json:"params"`
	Final          MAMLFinal          `json:"final"`
	GOMAXPROCS     int                `json:"gomaxprocs"`
	GoVersion      string             `json:"go_version"`
	Finished       time.Time          `json:"finished"`
	Config         MAMLConfig         `json:"config"`
}

// Variant names the method in summaries: "maml", or "fomaml" for
// first-order MAML.
func (c MAMLConfig) Variant() string {
	if c.FirstOrder {
		return "fomaml"
	}
	return "maml"
}

// Preset is the name of the sine preset whose tasks c trains on.
func (c MAMLConfig) Preset() string { return fmt.Sprintf("sine-%dshot", c.Shot) }

// Summary evaluates m with its config's protocol (Cfg.EvalTasks ×
// Cfg.EvalQuery, seed Cfg.Seed) and returns the run summary.
func (m *MAMLModel) Summary() (MAMLSummary, error) {
	c := m.Cfg
	e0 := time.Now()
	ev, err := m.Evaluate(c.EvalTasks, c.EvalQuery, c.Seed)
	if err != nil {
		return MAMLSummary{}, err
	}
	s := MAMLSummary{Preset: c.Preset(), Variant: c.Variant(), Source: m.src.Name(), Seed: c.Seed,
		Iters: m.Iter, TrainSeconds: m.TrainSeconds, EvalSeconds: time.Since(e0).Seconds(),
		Eval: &ev, EvalCheckpoint: "last", Params: len(m.Params),
		Final:      MAMLFinal{Iter: m.Iter, Loss: m.LastLoss, Data: m.LastLoss, LR: c.OuterLR, GradNorm: m.LastGradNorm},
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), Finished: time.Now().UTC(), Config: c}
	if m.Iter > 0 {
		s.MsPerIter = 1000 * m.TrainSeconds / float64(m.Iter)
	}
	return s, nil
}

// ErrMAMLRunExists is returned by RunMAML for a directory that already holds a
// run (a model or a summary): a new run never overwrites one.
var ErrMAMLRunExists = errors.New("experiments: run directory already holds a run")

// RunMAML trains a MAML model with cfg, saves it to dir, evaluates it and
// writes dir/summary.json (engine.FileSummary); dir is created if needed.
// When ctx is cancelled or the loss diverges, the model trained so far is
// saved (Train on the loaded model continues it) and the error is returned
// without a summary.
func RunMAML(ctx context.Context, cfg MAMLConfig, dir string, progress func(iter int, loss float64)) (MAMLSummary, error) {
	if err := cfg.Validate(); err != nil {
		return MAMLSummary{}, err
	}
	for _, name := range []string{FileMAML, engine.FileSummary} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return MAMLSummary{}, fmt.Errorf("%w: %s (choose another directory)", ErrMAMLRunExists, filepath.Join(dir, name))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return MAMLSummary{}, fmt.Errorf("experiments: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return MAMLSummary{}, fmt.Errorf("experiments: cannot create run directory: %w", err)
	}
	m, err := TrainMAML(ctx, cfg, progress)
	if m == nil {
		return MAMLSummary{}, err
	}
	// Training stops before an update that would make the parameters
	// non-finite, so what is saved is always the last good model.
	if serr := m.Save(dir); serr != nil {
		return MAMLSummary{}, serr
	}
	if err != nil {
		return MAMLSummary{}, err
	}
	s, err := m.Summary()
	if err != nil {
		return s, err
	}
	return s, runfile.WriteJSON(filepath.Join(dir, engine.FileSummary), s, runfile.Private)
}
