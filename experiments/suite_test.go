package experiments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/testutil"
	"github.com/mkbench/mkbench/presets"
)

func TestEfficiencyOneModelPerD(t *testing.T) {
	dir := t.TempDir()
	res := runExperiment(t, dir, Options{Experiment: Efficiency, Preset: "sine-5shot", Bases: []int{8, 32}}, 10)
	var got []string
	for _, p := range res.Points {
		got = append(got, p.Variant+"/"+p.Seeds[0].RunDir)
		var s engine.Summary
		if err := readJSON(filepath.Join(dir, p.Seeds[0].RunDir, engine.FileSummary), &s); err != nil || s.Config.Bases != p.Bases {
			t.Errorf("%s: trained with D=%d, point says %d (%v)", p.Seeds[0].RunDir, s.Config.Bases, p.Bases, err)
		}
	}
	want := []string{"rff/runs/rff-D8-s1", "metakernel/runs/metakernel-D8-s1", "rff/runs/rff-D32-s1", "metakernel/runs/metakernel-D32-s1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("points %v, want %v", got, want)
	}
	md := testutil.ReadFile(t, filepath.Join(dir, FileMarkdown))
	if !bytes.Contains(md, []byte("| D | `rff`: MSE | `metakernel`: MSE |")) || !bytes.Contains(md, []byte("| 32 |")) {
		t.Errorf("results.md:\n%s", md)
	}
	checkPNG(t, filepath.Join(dir, DirFigures, FigEfficiency+".png"), 1, 1)
	checkSVG(t, filepath.Join(dir, DirFigures, FigEfficiency+".svg"), "rff", "metakernel", "number of bases D (log₂ axis)", "test MSE (lower is better)", ">8<", ">32<")
}

// The shots experiment trains every variant at every shot count; the
// fits figure has a row per shot count.
func TestShotsTrainsEachShot(t *testing.T) {
	dir := t.TempDir()
	res := runExperiment(t, dir, Options{Experiment: Shots, Preset: "sine-5shot", Variants: []string{"vrf", "vrf+ctx"}, Shots: []int{3, 10}}, 10)
	if len(res.Points) != 4 {
		t.Fatalf("%d points", len(res.Points))
	}
	for _, p := range res.Points {
		var s engine.Summary
		readJSON(filepath.Join(dir, p.Seeds[0].RunDir, engine.FileSummary), &s)
		if s.Config.Shot != p.Shot || p.TrainShot != p.Shot || s.Preset != "sine-"+strconv.Itoa(p.Shot)+"shot" {
			t.Errorf("%s: preset %s, %d-shot, point %d-shot", p.Seeds[0].RunDir, s.Preset, s.Config.Shot, p.Shot)
		}
	}
	md := testutil.ReadFile(t, filepath.Join(dir, FileMarkdown))
	if !bytes.Contains(md, []byte("| method | variant | 3-shot: MSE | 10-shot: MSE |")) {
		t.Errorf("results.md:\n%s", md)
	}
	checkPNG(t, filepath.Join(dir, DirFigures, FigShots+".png"), 1, 1)
	checkSVG(t, filepath.Join(dir, DirFigures, FigShots+".svg"), "vrf+ctx", "shots k")
	checkPNG(t, filepath.Join(dir, DirFigures, FigFits+".png"), 2, FitTasks+1)
	checkSVG(t, filepath.Join(dir, DirFigures, FigFits+".svg"), "3-shot, display task 1", "10-shot, display task 3")
}

// Versatility evaluates the trained model at other shots with
// Checkpoint.Model + EvaluateOn; at the shot it was trained at, with the
// same evaluation size, that reproduces the run's own summary.
func TestVersatilityAtTrainedShotReproducesSummary(t *testing.T) {
	dir := t.TempDir()
	res := runExperiment(t, dir, Options{Experiment: Versatility, Preset: "sine-5shot", Shots: []int{3, 5, 20}}, 15)
	if len(res.Points) != 3 {
		t.Fatalf("%d points", len(res.Points))
	}
	var s engine.Summary
	if err := readJSON(filepath.Join(dir, "runs", "metakernel-s1", engine.FileSummary), &s); err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Points {
		if p.TrainShot != 5 || p.Variant != "metakernel" || p.Seeds[0].RunDir != filepath.Join("runs", "metakernel-s1") {
			t.Errorf("point %+v", p.PointKey)
		}
		if p.Shot == 5 && (p.Mean != s.Eval.Mean || p.EvalTasks != s.Eval.Tasks) {
			t.Errorf("at the trained shot: %v over %d tasks, summary %v over %d", p.Mean, p.EvalTasks, s.Eval.Mean, s.Eval.Tasks)
		}
	}
	if a, b := pointIndex(res, PointKey{Variant: "metakernel", Bases: 16, TrainShot: 5, Shot: 3}), pointIndex(res, PointKey{Variant: "metakernel", Bases: 16, TrainShot: 5, Shot: 20}); a < 0 || b < 0 || res.Points[a].Mean == res.Points[b].Mean {
		t.Errorf("3-shot and 20-shot cells: %+v", res.Points)
	}
	md := testutil.ReadFile(t, filepath.Join(dir, FileMarkdown))
	if !bytes.Contains(md, []byte("| model | trained at | 3-shot: MSE | 5-shot: MSE | 20-shot: MSE |")) || !bytes.Contains(md, []byte(" †")) {
		t.Errorf("results.md:\n%s", md)
	}
	checkPNG(t, filepath.Join(dir, DirFigures, FigVersatility+".png"), 1, 1)
	checkSVG(t, filepath.Join(dir, DirFigures, FigVersatility+".svg"), "metakernel, trained 5-shot", "evaluation shots k")

	// Cells are kept in evals.jsonl: a second run evaluates nothing.
	var phases []string
	r := &Runner{Dir: dir, Options: Options{Experiment: Versatility, Preset: "sine-5shot", Shots: []int{3, 5, 20}}, Overrides: tiny(15),
		Progress: func(p Progress) { phases = append(phases, p.Phase) }}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(phases, PhaseEval) || slices.Contains(phases, PhaseTrain) {
		t.Errorf("rerun phases %v", phases)
	}

	// --run evaluates an existing run without training. Its pace is the
	// whole run's, also when the evaluated parameters are from an earlier
	// iteration than its last: the summary now says 30 iterations in 6 s,
	// the checkpoint is from 15.
	s.Iters, s.TrainSeconds = 30, 6
	if err := writeJSON(filepath.Join(dir, "runs", "metakernel-s1", engine.FileSummary), s); err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	res2 := runExperiment(t, dir2, Options{Experiment: Versatility, Preset: "sine-5shot", Shots: []int{5}, FromRun: filepath.Join(dir, "runs", "metakernel-s1")}, 15)
	if len(res2.Points) != 1 || res2.Points[0].Mean != s.Eval.Mean || exists(filepath.Join(dir2, "runs", "metakernel-s1")) {
		t.Errorf("--run: %+v", res2.Points)
	} else if sr := res2.Points[0].Seeds[0]; sr.Iters != 15 || sr.TrainSeconds != 6 || sr.MsPerIter != 200 {
		t.Errorf("--run: iters %d, %.1f s, %.1f ms an iteration; want 15, 6 s, 200 ms", sr.Iters, sr.TrainSeconds, sr.MsPerIter)
	}
	// A cell too large for the machine is refused before it allocates,
	// naming the size, not killed by the kernel for its memory.
	dir3 := t.TempDir()
	r = &Runner{Dir: dir3, Options: Options{Experiment: Versatility, Preset: "sine-5shot", Shots: []int{5, 300_000_000},
		FromRun: filepath.Join(dir, "runs", "metakernel-s1")}, Overrides: tiny(15)}
	_, err := r.Run(context.Background())
	md3, _ := os.ReadFile(filepath.Join(dir3, FileMarkdown))
	if !errors.Is(err, ErrRunsFailed) || !strings.Contains(string(md3), "needs about") || !strings.Contains(string(md3), "300000000-shot") {
		t.Errorf("an oversized cell: want a memory refusal in the notes, got %v and\n%s", err, md3)
	}
}

// A baseline registered in Runner.Baselines trains through the hook; its
// summary and fits are written by the runner and reused on a rerun.
func TestBaselineHook(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	fake := func(ctx context.Context, job BaselineJob) (BaselineResult, error) {
		calls++
		if job.Dir == "" || job.Train == nil || len(job.Fits) != FitTasks || job.Config.Shot != 3 || job.Config.Iters != 10 {
			t.Errorf("job %+v", job)
		}
		out := BaselineResult{Eval: engine.EvalResult{Metric: "mse", Mean: 2.5, CI95: 0.1, Tasks: 8, Query: 10, Draws: 1}, Iters: 10, TrainSeconds: 1}
		for _, f := range job.Fits {
			f.PredMean = make([]float64, len(f.GridX)) // predicts zero
			out.Fits = append(out.Fits, f)
		}
		return out, nil
	}
	o := Options{Experiment: Shots, Preset: "sine-5shot", Variants: []string{"vrf", MAML}, Shots: []int{3}}
	r := &Runner{Dir: dir, Options: o, Overrides: tiny(10), Baselines: map[string]BaselineFunc{MAML: fake}}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := pointIndex(res, PointKey{Variant: MAML, TrainShot: 3, Shot: 3})
	if i < 0 || res.Points[i].Mean != 2.5 || res.Points[i].MsPerIter != 100 || calls != 1 {
		t.Fatalf("maml point %d of %+v, %d calls", i, res.Points, calls)
	}
	md := testutil.ReadFile(t, filepath.Join(dir, FileMarkdown))
	if !bytes.Contains(md, []byte("| MAML | `maml` |")) || !bytes.Contains(md, []byte("- 3-shot: better than MAML: ")) {
		t.Errorf("results.md:\n%s", md)
	}
	checkSVG(t, filepath.Join(dir, DirFigures, FigFits+".svg"), "maml (", "vrf (")
	if _, err := r.Run(context.Background()); err != nil || calls != 1 {
		t.Errorf("rerun: %v, %d calls", err, calls)
	}
	// Without the hook, maml is a clear error.
	if _, err := (&Runner{Dir: t.TempDir(), Options: o}).Run(context.Background()); err == nil || !strings.Contains(err.Error(), "MAML baseline is not available") {
		t.Errorf("maml without a baseline: %v", err)
	}
}

// Report redraws the tables and figures from the saved results alone.
func TestReportRedraws(t *testing.T) {
	dir := t.TempDir()
	runExperiment(t, dir, Options{Experiment: Ablation, Preset: "sine-3shot", Variants: []string{"rff", "vrf+cnf"}}, 10)
	md := testutil.ReadFile(t, filepath.Join(dir, FileMarkdown))
	csv := testutil.ReadFile(t, filepath.Join(dir, FileCSV))
	os.RemoveAll(filepath.Join(dir, DirFigures))
	os.Remove(filepath.Join(dir, FileMarkdown))
	os.Remove(filepath.Join(dir, FileCSV))
	res, err := Report(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(md, testutil.ReadFile(t, filepath.Join(dir, FileMarkdown))) || !bytes.Equal(csv, testutil.ReadFile(t, filepath.Join(dir, FileCSV))) {
		t.Error("report wrote different tables")
	}
	for _, f := range res.Figures {
		if !exists(filepath.Join(dir, f)) {
			t.Errorf("%s missing", f)
		}
	}
	checkPNG(t, filepath.Join(dir, DirFigures, FigOmega+".png"), 2, 3) // vrf+cnf stands in for metakernel
	if _, err := Report(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not an experiment directory") {
		t.Errorf("report on an empty folder: %v", err)
	}
}

// Classification figures from results alone (training Omniglot is too slow
// for a unit test): the versatility curves and heat map.
func TestClassificationFigures(t *testing.T) {
	dir := t.TempDir()
	res := &Results{Experiment: Versatility, Preset: "omniglot-20w5s", Source: "omniglot", Metric: "accuracy",
		Options: Options{Seeds: []uint64{1, 2}}}
	for _, k := range []int{1, 5, 10} {
		for _, w := range []int{5, 10, 20, 50, 100} {
			acc := 1 - 0.02*math.Log(float64(w))/float64(k)
			for seed := uint64(1); seed <= 2; seed++ {
				res.add(PointKey{Variant: "metakernel", Bases: 780, TrainWay: 20, TrainShot: 5, Way: w, Shot: k}, "accuracy",
					SeedResult{Seed: seed, Mean: acc - 0.001*float64(seed), CI95: 0.002, Tasks: 100, Query: 10, RunDir: "runs/metakernel-s" + strconv.FormatUint(seed, 10)})
			}
		}
	}
	if err := renderAll(dir, res); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, filepath.Join(dir, DirFigures, FigVersatility+".png"), 1, 1)
	checkSVG(t, filepath.Join(dir, DirFigures, FigVersatility+".svg"), "1-shot", "10-shot", "ways N (log axis)", "test accuracy (%, higher is better)", ">100<")
	checkPNG(t, filepath.Join(dir, DirFigures, FigHeatmap+".png"), 1, 1)
	checkSVG(t, filepath.Join(dir, DirFigures, FigHeatmap+".svg"), "ways N", "shots k", "*")
	md := string(res.Markdown())
	for _, want := range []string{"`metakernel` trained 20-way 5-shot, tested N-way k-shot", "| k \\ N | 5-way | 10-way | 20-way | 50-way | 100-way |", "| 5-shot |", "†"} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	p := res.Points[0]
	if p.CIKind != CISeeds || len(p.Seeds) != 2 || math.Abs(p.SD-0.001/math.Sqrt2) > 1e-12 {
		t.Errorf("two seeds: %+v", p)
	}
}

// pointIndex is the index of the point at key in res.Points, or -1.
func pointIndex(res *Results, key PointKey) int {
	return slices.IndexFunc(res.Points, func(p Point) bool { return p.PointKey == key })
}

func TestAggregateOverSeeds(t *testing.T) {
	var r Results
	k := PointKey{Variant: "vrf", Shot: 5, TrainShot: 5}
	r.add(k, "mse", SeedResult{Seed: 3, Mean: 0.3, CI95: 0.05, TrainSeconds: 30, MsPerIter: 3})
	if p := r.Points[0]; p.CIKind != CITasks || p.CI95 != 0.05 || p.SD != 0 {
		t.Errorf("one seed: %+v", p)
	}
	r.add(k, "mse", SeedResult{Seed: 1, Mean: 0.1, CI95: 0.05, TrainSeconds: 10, MsPerIter: 1})
	r.add(k, "mse", SeedResult{Seed: 2, Mean: 0.2, CI95: 0.05, TrainSeconds: 20, MsPerIter: 2})
	r.add(k, "mse", SeedResult{Seed: 2, Mean: 0.2, CI95: 0.05, TrainSeconds: 20, MsPerIter: 2}) // replaces, not adds
	p := r.Points[0]
	// Mean 0.2, sd 0.1, t(0.975, 2 dof) = 4.303.
	if len(p.Seeds) != 3 || p.Seeds[0].Seed != 1 || math.Abs(p.Mean-0.2) > 1e-12 || math.Abs(p.SD-0.1) > 1e-12 ||
		math.Abs(p.CI95-4.302652729749464*0.1/math.Sqrt(3)) > 1e-9 || p.CIKind != CISeeds || p.TrainSeconds != 20 || p.MsPerIter != 2 {
		t.Errorf("three seeds: %+v", p)
	}
}

func TestOptionErrors(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{Experiment: "ablate", Preset: "sine-5shot"}, `unknown experiment "ablate"`},
		{Options{Experiment: Ablation}, "--preset is required"},
		{Options{Experiment: Ablation, Preset: "sine-6shot"}, `unknown preset "sine-6shot"`},
		{Options{Experiment: Ablation, Preset: "sine-5shot", Variants: []string{"vfr"}}, `unknown variant "vfr"`},
		{Options{Experiment: Ablation, Preset: "sine-5shot", Bases: []int{16, 32}}, "--bases takes one value here"},
		{Options{Experiment: Ablation, Preset: "sine-5shot", Shots: []int{3}}, "--shots belongs to"},
		{Options{Experiment: Efficiency, Preset: "sine-5shot", Ways: []int{5}}, "--ways belongs to the versatility"},
		{Options{Experiment: Versatility, Preset: "sine-5shot", Ways: []int{5}}, "--ways needs a classification preset"},
		{Options{Experiment: Versatility, Preset: "sine-5shot", FromRun: "x", Seeds: []uint64{2}}, "--run evaluates that run's model"},
		{Options{Experiment: Ablation, Preset: "sine-5shot", FromRun: "x"}, "--run belongs to the versatility"},
		{Options{Experiment: Ablation, Preset: "sine-5shot", Seeds: []uint64{1, 1}}, "listed twice"},
		{Options{Experiment: Shots, Preset: "omniglot-5w1s", Variants: []string{MAML}}, "maml runs on regression presets only"},
		{Options{Experiment: Efficiency, Preset: "sine-5shot", Variants: []string{MAML}}, "not an engine variant"},
	}
	for _, c := range cases {
		if _, _, err := c.o.Normalize([]string{MAML}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.o, err, c.want)
		}
	}
	for _, c := range []struct {
		s, want string
		f       func(string) error
	}{
		{"1,x", `"x" is not a positive integer`, func(s string) error { _, err := ParseInts("bases", s); return err }},
		{"16,,32", `"" is not a positive integer`, func(s string) error { _, err := ParseInts("bases", s); return err }},
		{"5,5", "5 is listed twice", func(s string) error { _, err := ParseInts("ways", s); return err }},
		{"-1", `"-1" is not a seed`, func(s string) error { _, err := ParseSeeds(s); return err }},
		{"vrf,,rbf", "empty name", func(s string) error { _, err := ParseVariants(s); return err }},
	} {
		if err := c.f(c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.s, err, c.want)
		}
	}
	if v, err := ParseVariants("all"); err != nil || !slices.Equal(v, engine.Variants) {
		t.Errorf("all: %v %v", v, err)
	}
	o, _, err := Options{Experiment: Shots, Preset: "sine-5shot"}.Normalize([]string{MAML})
	if err != nil || !slices.Equal(o.Variants, []string{"vrf", "vrf+ctx", "metakernel", MAML}) || !slices.Equal(o.Shots, []int{3, 5, 10}) {
		t.Errorf("shots defaults with MAML available: %+v %v", o, err)
	}
	o, _, err = Options{Experiment: Versatility, Preset: "omniglot-20w5s"}.Normalize(nil)
	if err != nil || !slices.Equal(o.Ways, VersatilityWays) || !slices.Equal(o.Shots, VersatilityShots) || !slices.Equal(o.Variants, []string{"metakernel"}) {
		t.Errorf("omniglot versatility defaults: %+v %v", o, err)
	}
}

// The classification versatility grid on real Omniglot with a tiny Conv
// model: every cell is evaluated at its own way and shot, queries are cut
// to the images a class has left, a shot that leaves none is skipped with
// a note, and so is said a training episode shape other than the grid's †.
func TestOmniglotVersatilityGrid(t *testing.T) {
	data := testutil.Data(t, "omniglot")
	dir := t.TempDir()
	r := &Runner{Dir: dir, Options: Options{Experiment: Versatility, Preset: "omniglot-5w1s", Ways: []int{5, 10}, Shots: []int{1, 19, 20}, EvalTasks: 2, Data: data},
		Overrides: presets.Overrides{
			"conv_filters": 4,
			"infer_hidden": 8, "prior_hidden": 8, "flow_hidden": 8, "bases": 16,
			"meta_batch": 2, "query": 2, "iters": 2,
			"log_every": 1, "snapshot_every": 1, "checkpoint_sec": 0,
			"eval_query": 2, "eval_samples": 1, "val_every": 0,
			"train_way": 7, "train_shot": 2, "eval_support_shift": 1,
		}}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var cells []string
	for _, p := range res.Points {
		cells = append(cells, WayShot(p.Way, p.Shot))
		want := 2
		if p.Shot == 19 {
			want = 1
		}
		if p.Metric != "accuracy" || p.EvalTasks != 2 || p.EvalQuery != want || p.TrainWay != 5 || p.TrainShot != 1 || !(p.Mean >= 0 && p.Mean <= 1) {
			t.Errorf("cell %+v", p)
		}
	}
	if got := strings.Join(cells, ", "); got != "5-way 1-shot, 10-way 1-shot, 5-way 19-shot, 10-way 19-shot" {
		t.Errorf("cells %s", got)
	}
	// The grid's † is the validated setting; the training episodes'
	// other shape is said once, and so are the support copies every cell
	// is tested with.
	if len(res.Notes) != 3 || !strings.Contains(res.Notes[0], "trained on 7-way 2-shot episodes (train_way, train_shot) and validated at 5-way 1-shot") ||
		!strings.Contains(res.Notes[1], "joined by its 8 copies shifted by up to 1 pixels (eval_support_shift 1)") ||
		!strings.Contains(res.Notes[2], "20-shot cells skipped") {
		t.Errorf("notes %q", res.Notes)
	}
	checkPNG(t, filepath.Join(dir, DirFigures, FigHeatmap+".png"), 1, 1)
	checkPNG(t, filepath.Join(dir, DirFigures, FigVersatility+".png"), 1, 1)
}

// Classification learning curves add the validation accuracy from
// val.jsonl as a fourth panel.
func TestClassificationLearningCurves(t *testing.T) {
	dir := t.TempDir()
	res := &Results{Experiment: Ablation, Preset: "omniglot-5w1s", Source: "omniglot", Metric: "accuracy", Options: Options{Seeds: []uint64{1}}}
	for i, v := range []string{"rff", "metakernel"} {
		run := filepath.Join("runs", v+"-s1")
		os.MkdirAll(filepath.Join(dir, run), 0o755)
		var m, val bytes.Buffer
		for it := 10; it <= 200; it += 10 {
			fmt.Fprintf(&m, `{"iter":%d,"loss":%g,"data":%g,"kl":%g}`+"\n", it, 2/float64(it)+float64(i), 1/float64(it), 0.1*float64(i))
			if it%50 == 0 {
				fmt.Fprintf(&val, `{"iter":%d,"metric":"accuracy","mean":%g,"tasks":10}`+"\n", it, 0.5+float64(it)/500)
			}
		}
		os.WriteFile(filepath.Join(dir, run, engine.FileMetrics), m.Bytes(), 0o644)
		os.WriteFile(filepath.Join(dir, run, engine.FileVal), val.Bytes(), 0o644)
		res.add(PointKey{Variant: v, Way: 5, Shot: 1, TrainWay: 5, TrainShot: 1}, "accuracy", SeedResult{Seed: 1, Mean: 0.9, RunDir: run})
	}
	if err := renderAll(dir, res); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, filepath.Join(dir, DirFigures, FigCurves+".png"), 2, 3)
	checkSVG(t, filepath.Join(dir, DirFigures, FigCurves+".svg"), "validation accuracy", "training cross-entropy", "rff", "metakernel")
}

// A failing run does not stop the others; the experiment reports it at
// the end, with the tables and figures of the rest written.
func TestFailedRunDoesNotStopTheOthers(t *testing.T) {
	dir := t.TempDir()
	broken := func(ctx context.Context, job BaselineJob) (BaselineResult, error) {
		return BaselineResult{}, errors.New("diverged at iteration 3")
	}
	var phases []string
	r := &Runner{Dir: dir, Options: Options{Experiment: Ablation, Preset: "sine-5shot", Variants: []string{MAML, "rbf"}},
		Overrides: tiny(10), Baselines: map[string]BaselineFunc{MAML: broken},
		Progress: func(p Progress) { phases = append(phases, p.Phase) }}
	res, err := r.Run(context.Background())
	if !errors.Is(err, ErrRunsFailed) || !strings.Contains(err.Error(), "runs/maml-s1") {
		t.Fatalf("error %v", err)
	}
	if res.Complete || len(res.Points) != 1 || res.Points[0].Variant != "rbf" || !slices.Contains(phases, PhaseFailed) {
		t.Errorf("results %+v, phases %v", res, phases)
	}
	md := testutil.ReadFile(t, filepath.Join(dir, FileMarkdown))
	if !bytes.Contains(md, []byte("`runs/maml-s1` failed: runs/maml-s1: diverged at iteration 3")) || !exists(filepath.Join(dir, DirFigures, FigFits+".png")) {
		t.Errorf("results.md:\n%s", md)
	}
}
