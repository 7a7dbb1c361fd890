package experiments

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/task"
)

// Files the experiments add to a regression run directory: what its
// figures draw, computed once from the evaluated checkpoint so that
// `mkbench report` redraws them without loading models.
const (
	FileFits  = "fits.json"  // FitFile
	FileOmega = "omega.json" // OmegaFile (flow variants only)
)

// Defaults for the regression figures.
const (
	// FitTasks is how many display tasks the sine-fit figures draw.
	FitTasks = 3
	// fitDraws is the number of ω draws behind each fit's mean and spread.
	fitDraws = 20
	// omegaSamples is how many bases the ω histograms pool, from as many
	// independent draws of the D bases as that takes: 8 draws at the sine
	// presets' D = 128, where one draw is too few for a histogram. The cap
	// keeps omega.json at about 1 MB whatever D is.
	omegaSamples = 1024
)

// Fit is one regression display task — its truth on a grid and its
// support set — and a model's prediction on the grid.
type Fit struct {
	Task     int       `json:"task"`
	GridX    []float64 `json:"grid_x"`
	Truth    []float64 `json:"truth"`
	SupportX []float64 `json:"support_x"`
	SupportY []float64 `json:"support_y"`
	PredMean []float64 `json:"pred_mean,omitempty"`
	// PredSD is the spread of the prediction over ω draws (nil for
	// methods without one).
	PredSD []float64 `json:"pred_sd,omitempty"`
	MSE    float64   `json:"mse"` // of PredMean against Truth on the grid
	Draws  int       `json:"draws,omitempty"`
}

// FitFile is fits.json.
type FitFile struct {
	Variant    string `json:"variant"`
	Seed       uint64 `json:"seed"`
	Shot       int    `json:"shot"`
	Iter       int    `json:"iter"`
	Checkpoint string `json:"checkpoint"` // which parameters were drawn
	Fits       []Fit  `json:"fits"`
}

// OmegaFile is omega.json: samples of the bases of display task Task after
// each flow step, Steps[k] holding min(Draws·D, 1024) rows of Dim values
// (k = 0 is the Gaussian q0), rounded to four decimals: about 1 MB.
type OmegaFile struct {
	Variant string      `json:"variant"`
	Seed    uint64      `json:"seed"`
	Task    int         `json:"task"`
	D       int         `json:"d_bases"`
	Dim     int         `json:"dim"`
	Draws   int         `json:"draws"`
	Steps   [][]float32 `json:"steps"`
}

// evalCheckpoint is the checkpoint a run's summary was evaluated with: the
// best-validation parameters when the run kept them, else the last.
func evalCheckpoint(dir string) (string, string) {
	best := filepath.Join(dir, engine.FileBest)
	if _, err := os.Stat(best); err == nil {
		return best, "best"
	}
	return filepath.Join(dir, engine.FileCheckpoint), "last"
}

// ensureDisplays writes fits.json (and omega.json for flow variants) into
// a finished regression run directory unless they are there already.
// Classification runs have no display and get nothing.
func ensureDisplays(dir string, src task.Source, tasks int) error {
	if _, ok := src.(task.CurveSource); !ok {
		return nil
	}
	_, errF := os.Stat(filepath.Join(dir, FileFits))
	path, which := evalCheckpoint(dir)
	ck, err := engine.LoadCheckpoint(path)
	if err != nil {
		return err
	}
	_, errO := os.Stat(filepath.Join(dir, FileOmega))
	needOmega := ck.Config.FlowLayers > 0 && errO != nil
	if errF == nil && !needOmega {
		return nil
	}
	m, err := ck.Model(src)
	if err != nil {
		return err
	}
	defer m.Close()
	if errF != nil {
		ff := FitFile{Variant: ck.Config.Variant(), Seed: ck.Config.Seed, Shot: ck.Config.Shot, Iter: ck.Iter, Checkpoint: which}
		for t := 0; t < tasks; t++ {
			d, err := m.Display(ck.Iter, t, fitDraws)
			if err != nil {
				return err
			}
			if d == nil {
				return nil
			}
			ff.Fits = append(ff.Fits, fitOf(t, d))
		}
		if err := writeJSON(filepath.Join(dir, FileFits), ff); err != nil {
			return err
		}
	}
	if needOmega {
		D, dim := ck.Config.Bases, ck.Config.FeatureDim()
		of := OmegaFile{Variant: ck.Config.Variant(), Seed: ck.Config.Seed, D: D, Dim: dim, Draws: (omegaSamples + D - 1) / D}
		for s := 0; s < of.Draws; s++ {
			// Display draws its bases from a stream indexed by iteration,
			// so successive "iterations" give independent draws.
			d, err := m.Display(ck.Iter+s, of.Task, 1)
			if err != nil {
				return err
			}
			if d == nil || len(d.OmegaSteps) == 0 {
				return nil
			}
			if of.Steps == nil {
				of.Steps = make([][]float32, len(d.OmegaSteps))
			}
			for k, w := range d.OmegaSteps {
				for _, v := range w[:min(len(w), (omegaSamples-s*D)*dim)] {
					// Four decimals are far below a histogram bin and
					// keep the file small.
					of.Steps[k] = append(of.Steps[k], float32(math.Round(v*1e4)/1e4))
				}
			}
		}
		// Compact: indented, every number would take a line of its own.
		b, err := json.Marshal(of)
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, FileOmega), append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

func fitOf(task int, d *engine.Display) Fit {
	return Fit{Task: task, GridX: d.GridX, Truth: d.Truth, SupportX: d.SupportX, SupportY: d.SupportY,
		PredMean: d.PredMean, PredSD: d.PredSD, MSE: d.TaskMSE, Draws: d.Draws}
}

// displayTasks returns the regression display tasks of cfg's seed and shot
// without predictions, for baselines to predict. The task (truth and
// support) is a function of the seed, the shot and the task number only,
// so any model of that seed draws the same ones; an untrained RBF model
// is the cheapest.
func displayTasks(cfg engine.Config, src task.Source, tasks int) ([]Fit, error) {
	if _, ok := src.(task.CurveSource); !ok {
		return nil, nil
	}
	if err := cfg.ApplyVariant("rbf", 0); err != nil {
		return nil, err
	}
	m, err := engine.NewModel(cfg, src)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	var out []Fit
	for t := 0; t < tasks; t++ {
		d, err := m.Display(0, t, 1)
		if err != nil {
			return nil, err
		}
		f := fitOf(t, d)
		f.PredMean, f.PredSD, f.MSE, f.Draws = nil, nil, 0, 0
		out = append(out, f)
	}
	return out, nil
}
