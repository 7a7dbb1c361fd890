package engine

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"os"

	"github.com/mkbench/mkbench/engine/runfile"
	"github.com/mkbench/mkbench/engine/task"
)

const checkpointVersion = 1

// Checkpoint is everything needed to continue a run exactly where it
// stopped, or to evaluate it: parameters, optimizer moments, the carried
// LSTM context and the partial metrics window. Random streams are derived
// from (seed, iteration), so no RNG state is needed.
type Checkpoint struct {
	Version      int
	Preset       string
	Source       string
	Config       Config
	Iter         int
	Params       []*Param
	Optimizer    *Optimizer
	State        LSTMState
	Window       window
	TrainSeconds float64
	// Best validation so far (see Config.ValEvery): its metric and
	// iteration; BestIter 0 means none yet.
	BestVal  float64
	BestIter int
}

func newCheckpoint(preset, source string, m *Model, opt *Optimizer, iter int, win window, trainSec float64) *Checkpoint {
	return &Checkpoint{Version: checkpointVersion, Preset: preset, Source: source, Config: m.Cfg, Iter: iter,
		Params: m.Params.List, Optimizer: opt, State: m.State, Window: win, TrainSeconds: trainSec}
}

// Save writes the checkpoint atomically: to a temporary file in the same
// directory, synced, then renamed over the old one, so a crash mid-write
// leaves the previous checkpoint intact.
func (c *Checkpoint) Save(path string) error {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(c); err != nil {
		return fmt.Errorf("engine: encoding checkpoint: %w", err)
	}
	return runfile.WriteAtomic(path, buf.Bytes(), runfile.Private)
}

// ErrBadCheckpoint reports an unreadable or inconsistent checkpoint.
var ErrBadCheckpoint = errors.New("engine: bad checkpoint")

// LoadCheckpoint reads and sanity-checks a checkpoint file.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("engine: no checkpoint at %s: is this a run directory made by mkbench run?", path)
		}
		return nil, fmt.Errorf("engine: reading checkpoint: %w", err)
	}
	var c Checkpoint
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %s cannot be decoded (%v); it is damaged or not an mkbench checkpoint", ErrBadCheckpoint, path, err)
	}
	if c.Version != checkpointVersion {
		return nil, fmt.Errorf("%w: %s has version %d, this mkbench reads version %d", ErrBadCheckpoint, path, c.Version, checkpointVersion)
	}
	if err := c.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadCheckpoint, path, err)
	}
	if c.Iter < 0 || c.Optimizer == nil {
		return nil, fmt.Errorf("%w: %s is incomplete", ErrBadCheckpoint, path)
	}
	return &c, nil
}

// restore loads the checkpoint's parameters, optimizer and context into a
// model built from the same configuration.
func (c *Checkpoint) restore(m *Model, opt *Optimizer) error {
	if err := m.Params.CopyFrom(c.Params); err != nil {
		return fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	if len(c.Optimizer.M) != len(m.Params.List) {
		return fmt.Errorf("%w: optimizer state does not match the model", ErrBadCheckpoint)
	}
	for i, p := range m.Params.List {
		if len(c.Optimizer.M[i]) != p.Size() || (c.Optimizer.Kind == "adam" && len(c.Optimizer.V[i]) != p.Size()) {
			return fmt.Errorf("%w: optimizer state of %s does not match the model", ErrBadCheckpoint, p.Name)
		}
	}
	*opt = *c.Optimizer
	for k := 0; k < 2; k++ {
		if len(c.State.H[k]) != len(m.State.H[k]) || len(c.State.C[k]) != len(m.State.C[k]) {
			return fmt.Errorf("%w: context state does not match the model", ErrBadCheckpoint)
		}
	}
	m.State = c.State.clone()
	return nil
}

// Model rebuilds the checkpoint's model on its task family src.
func (c *Checkpoint) Model(src task.Source) (*Model, error) {
	if c.Source != src.Name() {
		return nil, fmt.Errorf("%w: trained on %q, not %q", ErrBadCheckpoint, c.Source, src.Name())
	}
	m, err := NewModel(c.Config, src)
	if err != nil {
		return nil, err
	}
	if err := c.restore(m, NewOptimizer(c.Config, m.Params.List)); err != nil {
		return nil, err
	}
	return m, nil
}
