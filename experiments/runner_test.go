package experiments

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/testutil"
	"github.com/mkbench/mkbench/presets"
)

// tiny shrinks every run so that an experiment takes a second or two.
func tiny(iters int) presets.Overrides {
	return presets.Overrides{
		"iters": iters, "embed_hidden": []int{8, 8},
		"infer_hidden": 8, "prior_hidden": 8, "flow_hidden": 8, "bases": 16,
		"meta_batch": 4, "query": 5,
		"snapshot_every": 5, "log_every": 5, "checkpoint_sec": 0,
		"eval_tasks": 8, "eval_query": 10, "eval_samples": 2,
	}
}

func runExperiment(t *testing.T, dir string, o Options, iters int) *Results {
	t.Helper()
	r := &Runner{Dir: dir, Options: o, Overrides: tiny(iters)}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkPNG decodes a figure and checks its pixel size.
func checkPNG(t *testing.T, path string, rows, cols int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	w, h := FigureSize(rows, cols)
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("%s is %d×%d, want %d×%d (%d×%d panels)", path, b.Dx(), b.Dy(), w, h, rows, cols)
	}
}

// checkSVG checks that an SVG figure names what a reader needs: legend
// entries and axis titles.
func checkSVG(t *testing.T, path string, want ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("<?xml")) || !bytes.Contains(b, []byte("<svg")) {
		t.Fatalf("%s is not an SVG document", path)
	}
	for _, w := range want {
		if !bytes.Contains(b, []byte(w)) {
			t.Errorf("%s does not contain %q", path, w)
		}
	}
}

func TestAblationWritesTablesAndFigures(t *testing.T) {
	dir := t.TempDir()
	res := runExperiment(t, dir, Options{Experiment: Ablation, Preset: "sine-5shot", Variants: []string{"rbf", "vrf", "metakernel"}}, 20)
	if !res.Complete || len(res.Points) != 3 || res.Metric != "mse" {
		t.Fatalf("results: complete %v, %d points, metric %s", res.Complete, len(res.Points), res.Metric)
	}
	for _, p := range res.Points {
		if len(p.Seeds) != 1 || p.CIKind != CITasks || p.Seeds[0].Seed != 1 || !(p.Mean > 0) || !(p.CI95 > 0) || p.EvalTasks != 8 {
			t.Errorf("point %+v", p)
		}
		s := p.Seeds[0]
		if s.Iters != 20 || !(s.TrainSeconds > 0) || !(s.MsPerIter > 0) || !exists(filepath.Join(dir, s.RunDir, engine.FileSummary)) {
			t.Errorf("seed result %+v", s)
		}
	}
	if got := res.Points[2].Seeds[0].RunDir; got != filepath.Join("runs", "metakernel-s1") {
		t.Errorf("run dir %q", got)
	}
	md, _ := os.ReadFile(filepath.Join(dir, FileMarkdown))
	for _, want := range []string{"| method | variant | sine-5shot (5-shot): MSE |", "MetaKernel (full model)", "Best to worst:", "`vrf` better than `rbf`", "figures/learning-curves.png"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	rows, err := csv.NewReader(bytes.NewReader(testutil.ReadFile(t, filepath.Join(dir, FileCSV)))).ReadAll()
	if err != nil || len(rows) != 4 || rows[0][2] != "variant" || rows[3][2] != "metakernel" {
		t.Fatalf("results.csv: %v %q", err, rows)
	}
	checkPNG(t, filepath.Join(dir, DirFigures, FigCurves+".png"), 2, 2)
	checkSVG(t, filepath.Join(dir, DirFigures, FigCurves+".svg"), "rbf", "metakernel", "iteration", "KL divergence", "loss = −ELBO", "training query MSE")
	checkPNG(t, filepath.Join(dir, DirFigures, FigFits+".png"), 1, FitTasks+1)
	checkSVG(t, filepath.Join(dir, DirFigures, FigFits+".svg"), "ground truth", "support points", "vrf (", "display task 1", "y = A·sin(wx + b)")
	checkPNG(t, filepath.Join(dir, DirFigures, FigOmega+".png"), 2, 3)
	checkSVG(t, filepath.Join(dir, DirFigures, FigOmega+".svg"), "after flow step 4", "density", "ω₀ ~ q₀")
	if len(res.Figures) != 6 {
		t.Errorf("figures %v", res.Figures)
	}
}

// An experiment stopped in the middle of a run continues where it
// stopped: finished runs are reused, the interrupted one resumes from its
// checkpoint, and the results equal an uninterrupted experiment's.
func TestInterruptedExperimentResumes(t *testing.T) {
	o := Options{Experiment: Ablation, Preset: "sine-5shot", Variants: []string{"rff", "vrf+ctx"}}
	whole := runExperiment(t, t.TempDir(), o, 40)

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &Runner{Dir: dir, Options: o, Overrides: tiny(40), ReportEvery: 1,
		Progress: func(p Progress) {
			if p.Job == 2 && p.Phase == PhaseStep && p.Snapshot.Iter >= 20 {
				cancel()
			}
		}}
	if _, err := r.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if exists(filepath.Join(dir, "runs", "vrf_ctx-s1", engine.FileSummary)) || !exists(filepath.Join(dir, "runs", "vrf_ctx-s1", engine.FileCheckpoint)) {
		t.Fatal("the interrupted run should have a checkpoint and no summary")
	}
	partial, err := LoadResults(dir)
	if err != nil || len(partial.Points) != 1 || partial.Complete {
		t.Fatalf("partial results: %v %+v", err, partial)
	}
	var phases []string
	r = &Runner{Dir: dir, Options: o, Overrides: tiny(40), Progress: func(p Progress) {
		if p.Phase != PhaseStep {
			phases = append(phases, p.Phase)
		}
	}}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{PhaseReuse, PhaseDone, PhaseResume, PhaseDone, PhaseFigures}; strings.Join(phases, ",") != strings.Join(want, ",") {
		t.Errorf("phases %v, want %v", phases, want)
	}
	for i, p := range res.Points {
		if p.Mean != whole.Points[i].Mean || p.Seeds[0].Iters != 40 {
			t.Errorf("%s: resumed %v (%d iters), uninterrupted %v", p.Variant, p.Mean, p.Seeds[0].Iters, whole.Points[i].Mean)
		}
	}
	// Another command on the same directory is refused, naming the change.
	r = &Runner{Dir: dir, Options: Options{Experiment: Ablation, Preset: "sine-5shot", Variants: []string{"rff"}}}
	if _, err := r.Run(context.Background()); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "variants") {
		t.Errorf("a different experiment in the same directory: %v", err)
	}
}
