package experiments

import (
	"fmt"
	"path/filepath"

	"github.com/mkbench/mkbench/presets"
)

// Figure file names (without extension) under figures/.
const (
	FigCurves      = "learning-curves"     // ablation: loss, KL, metric per variant
	FigFits        = "sine-fits"           // regression: truth, support, each variant's fit
	FigOmega       = "omega-flow"          // regression: ω after each flow step (metakernel)
	FigEfficiency  = "efficiency"          // metric vs D
	FigVersatility = "versatility"         // metric vs way per shot (or vs shot)
	FigHeatmap     = "versatility-heatmap" // accuracy over the way × shot grid
	FigShots       = "shots"               // metric vs shot per variant
)

// renderAll draws every figure of the experiment that its results allow
// and records them in res.Figures. A panic inside the plotting library
// (it panics on some degenerate inputs) comes back as an error.
//
// The figures, by kind: learning curves (figures_curves.go), sine fits
// (figures_fits.go), ω after each flow step (figures_omega.go), the metric
// against a setting — D, shots, ways — (figures_settings.go) and the
// versatility heat map (figures_heatmap.go).
func renderAll(dir string, res *Results) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("experiments: drawing the figures: %v", p)
		}
	}()
	if len(res.Points) == 0 {
		res.Figures = nil
		return nil
	}
	regression := res.Metric != "accuracy"
	if regression {
		// Fits are computed at the end of each run; a run directory from
		// before that (or a report on a copied experiment) gets them here.
		if src, err := presets.NewSource(res.Source); err == nil {
			for _, p := range res.Points {
				for _, s := range p.Seeds {
					if p.Variant == MAML {
						continue
					}
					if err := ensureDisplays(runPath(dir, s.RunDir), src, FitTasks); err != nil {
						return err
					}
				}
			}
		}
	}
	type drawer func(dir string, res *Results) ([]string, error)
	var draw []drawer
	switch res.Experiment {
	case Ablation:
		draw = append(draw, curvesFigure)
		if regression {
			draw = append(draw, fitsFigure, omegaFigure)
		}
	case Efficiency:
		draw = append(draw, efficiencyFigure)
	case Shots:
		draw = append(draw, shotsFigure)
		if regression {
			draw = append(draw, fitsFigure)
		}
	case Versatility:
		draw = append(draw, versatilityFigure)
		if !regression {
			draw = append(draw, heatmapFigure)
		}
	}
	var paths []string
	for _, d := range draw {
		ps, err := d(dir, res)
		if err != nil {
			return err
		}
		for _, p := range ps {
			rel, _ := filepath.Rel(dir, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
	}
	res.Figures = paths
	return nil
}

// runPath resolves a SeedResult.RunDir against the experiment directory.
func runPath(dir, run string) string {
	if filepath.IsAbs(run) {
		return run
	}
	return filepath.Join(dir, run)
}

// title is the figure title's common start.
func (r *Results) title(what string) string {
	return fmt.Sprintf("%s — %s, %s %s", what, r.Preset, plural(len(r.seeds()), "seed"), seedList(r.seeds()))
}

// firstSeed is the experiment's first seed, whose runs draw the fits.
func firstSeed(res *Results) uint64 {
	if s := res.seeds(); len(s) > 0 {
		return s[0]
	}
	return 0
}
