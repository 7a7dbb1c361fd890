package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mkbench/mkbench/experiments"
	"github.com/mkbench/mkbench/presets"
)

// DirUnits is the folder of a sweep directory that holds the units' run
// directories.
const DirUnits = "units"

// Unit is one run of a sweep: an ordinary run directory (Dir, relative to
// the sweep directory) that a worker trains, resumes, or leaves alone when
// it is finished.
type Unit struct {
	Index   int    `json:"index"` // the Slurm array index; the position in Manifest.Units
	Name    string `json:"name"`
	Dir     string `json:"dir"`
	Preset  string `json:"preset"`
	Variant string `json:"variant"`
	Seed    uint64 `json:"seed"`
	// Record is the preset name the run records when it is not Preset
	// (an experiment's shots runs: "sine-5shot@shot7").
	Record string `json:"record,omitempty"`
	// Grid is the unit's grid point, key=value in the file's order.
	Grid []string `json:"grid,omitempty"`
	// Set is every setting the unit overrides, key=value (ParseSet's
	// syntax, exact for floats): the grid point, the seed, and the sweep's
	// iters and eval_tasks.
	Set []string `json:"set"`
	// Minutes is the training-time budget (0: none).
	Minutes float64 `json:"minutes,omitempty"`
	// Device is where the unit's worker runs its backbones, as --device
	// takes it: the sweep's --device, else the file's device:, else
	// $MKBENCH_DEVICE, else cpu, settled when the sweep starts (and by
	// sweep resume --device). "" (sweeps made before devices, an
	// experiment's units) leaves the worker's $MKBENCH_DEVICE. It is not
	// in Set: the run's config is the same on any device.
	Device string `json:"device,omitempty"`
}

// OnDevice reports whether the unit asks for a device other than the
// CPU, and so, on Slurm, for a GPU.
func (u Unit) OnDevice() bool { return u.Device != "" && u.Device != "cpu" }

// WithDevice sets every unit's Device to device.
func WithDevice(units []Unit, device string) {
	for i := range units {
		units[i].Device = device
	}
}

// Spec is the unit's run spec.
func (u Unit) Spec() presets.Spec {
	ov := presets.Overrides{}
	for _, s := range u.Set {
		k, v, err := presets.ParseSet(s)
		if err == nil {
			ov[k] = v
		}
	}
	return presets.Spec{Preset: u.Preset, Variant: u.Variant, Overrides: ov}
}

// RecordedPreset is the preset name the unit's run records.
func (u Unit) RecordedPreset() string {
	if u.Record != "" {
		return u.Record
	}
	return u.Preset
}

// Setting is the unit's grid point as one label ("bases=64 lr=0.001"),
// "" without a grid.
func (u Unit) Setting() string { return strings.Join(u.Grid, " ") }

// Units lists the sweep's units: every preset × variant × grid point ×
// seed, seeds outermost so that the first seed's results are complete
// first. Names are stable: they depend on the settings only.
func (f File) Units() []Unit {
	points := [][]string{nil}
	for _, ax := range f.Grid {
		var next [][]string
		for _, p := range points {
			for _, v := range ax.Values {
				next = append(next, append(append([]string(nil), p...), v))
			}
		}
		points = next
	}
	var out []Unit
	seeds := f.Seeds
	for si := 0; si < max(len(seeds), 1); si++ {
		for _, pn := range f.Presets {
			p, err := presets.Get(pn)
			if err != nil {
				continue // ParseFile checked the names
			}
			seed := p.Config.Seed
			if len(seeds) > 0 {
				seed = seeds[si]
			}
			variants := f.Variants
			if len(variants) == 0 {
				variants = []string{p.Variant}
			}
			for _, v := range variants {
				for _, pt := range points {
					u := Unit{Index: len(out), Preset: pn, Variant: v, Seed: seed, Grid: pt, Minutes: f.Minutes, Device: f.Device}
					u.Set = append(append(u.Set, pt...), fmt.Sprintf("seed=%d", seed))
					if f.Iters > 0 {
						u.Set = append(u.Set, fmt.Sprintf("iters=%d", f.Iters))
					}
					if f.EvalTasks > 0 {
						u.Set = append(u.Set, fmt.Sprintf("eval_tasks=%d", f.EvalTasks))
					}
					u.Name = UnitName(pn, v, pt, seed)
					u.Dir = filepath.Join(DirUnits, u.Name)
					out = append(out, u)
				}
			}
		}
	}
	return out
}

// UnitName is a unit's stable directory name: preset, variant ("+"
// written "_"), each grid value as key and value, and the seed, e.g.
// "sine-5shot-vrf_ctx-bases64-lr0.001-s1". Characters a shell or a file
// system could trip on become "_". A name longer than a file system
// takes (MaxUnitName bytes) is cut, and a hash of the whole assignment
// keeps it apart from every other; names that fit are as they always
// were, so an older sweep's units are found where they are.
func UnitName(preset, variant string, grid []string, seed uint64) string {
	parts := []string{preset, presets.VariantSlug(variant)}
	for _, g := range grid {
		k, v, _ := strings.Cut(g, "=")
		parts = append(parts, k+strings.ReplaceAll(v, ",", "x"))
	}
	parts = append(parts, fmt.Sprintf("s%d", seed))
	name := SafeName(strings.Join(parts, "-"))
	if len(name) <= MaxUnitName {
		return name
	}
	// The hash is of what the name stands for, not of the name, which
	// may already have merged two assignments.
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d", preset, variant, seed)
	for _, g := range grid {
		fmt.Fprintf(h, "\x00%s", g)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	return fmt.Sprintf("%s-%s-s%d", name[:shortPrefix], sum, seed)
}

// MaxUnitName is the longest unit directory name: NAME_MAX, the bytes of
// one path component on Linux, macOS and Windows file systems.
const MaxUnitName = 255

// shortPrefix is how much of a cut name is kept: room for a hash, the
// seed, and a sibling the size of "NAME.moved-20260101T000000Z" beside it.
const shortPrefix = 160

// SafeName writes s with every character but letters, digits and -._@
// as "_", so it needs no quoting in a shell or on any file system.
func SafeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_', r == '@':
			return r
		}
		return '_'
	}, s)
}

// ExperimentUnits are an experiment's training runs as units of a sweep
// whose directory is the experiment's: each unit's directory is the run's
// own (runs/NAME), so the experiment's Runner finds them finished.
func ExperimentUnits(runs []experiments.TrainingRun) []Unit {
	out := make([]Unit, len(runs))
	for i, r := range runs {
		out[i] = Unit{Index: i, Name: filepath.Base(r.Dir), Dir: r.Dir, Preset: r.Preset, Variant: r.Variant, Seed: r.Seed,
			Set: r.Set, Minutes: r.Minutes}
		if r.Record != r.Preset {
			out[i].Record = r.Record
		}
	}
	return out
}

// TrainingRun is the unit as an experiment's training run, for
// experiments.TrainBaseline.
func (u Unit) TrainingRun() experiments.TrainingRun {
	return experiments.TrainingRun{Dir: u.Dir, Preset: u.Preset, Variant: u.Variant, Record: u.RecordedPreset(), Seed: u.Seed, Set: u.Set, Minutes: u.Minutes}
}
