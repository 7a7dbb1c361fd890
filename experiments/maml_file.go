package experiments

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/mkbench/mkbench/internal/runfile"
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
	var f mamlFile
	if err := readJSON(path, &f); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("experiments: loading MAML: %w", err)
		}
		return nil, err
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
