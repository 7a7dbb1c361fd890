package experiments

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/mkbench/mkbench/datasets"
	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/presets"
)

// mamlGradProblem is one task and a parameter point at which the hand-written
// derivatives are checked. The parameters are He-initialized rather than
// MAML's sd-0.01 start, so that every layer's curvature matters.
type mamlGradProblem struct {
	net            *mamlNet
	theta          []float64
	xs, ys, xq, yq []float64
}

func newMAMLGradProblem(hidden []int, ns, nq int, seed uint64) mamlGradProblem {
	rng := rand.New(rand.NewPCG(seed, 7))
	net := newMAMLNet(1, hidden, 1)
	theta := make([]float64, net.n)
	for l := 1; l <= net.layers(); l++ {
		sd := math.Sqrt(2 / float64(net.dims[l-1]))
		for i := net.w[l]; i < net.b[l]; i++ {
			theta[i] = sd * rng.NormFloat64()
		}
		for i := net.b[l]; i < net.b[l]+net.dims[l]; i++ {
			theta[i] = 0.1 * rng.NormFloat64()
		}
	}
	task := datasets.DrawSineTask(rng)
	draw := func(n int) (x, y []float64) {
		x, y = make([]float64, n), make([]float64, n)
		for i := range x {
			x[i] = -5 + 10*rng.Float64()
			y[i] = task.At(x[i])
		}
		return x, y
	}
	p := mamlGradProblem{net: net, theta: theta}
	p.xs, p.ys = draw(ns)
	p.xq, p.yq = draw(nq)
	return p
}

// mamlMasks hashes which hidden units are active in a pass: within one
// activation pattern the functions below are polynomials in θ, so a
// central difference whose two ends share the centre's pattern is an
// honest check, and one that crosses a ReLU kink is skipped.
func mamlMasks(h interface{ Write([]byte) (int, error) }, net *mamlNet, p *mamlPass) {
	for l := 1; l < net.layers(); l++ {
		buf := make([]byte, len(p.acts[l]))
		for i, v := range p.acts[l] {
			if v > 0 {
				buf[i] = 1
			}
		}
		h.Write(buf)
	}
}

// metaLoss is F(θ) = L_Q(θ_K) computed forward only, independently of
// metaGrad's caches, with the activation pattern of every pass.
func (p mamlGradProblem) metaLoss(theta []float64, steps int, alpha float64) (float64, uint64) {
	net := p.net
	h := fnv.New64a()
	th := append([]float64(nil), theta...)
	sp, grad := net.newPass(len(p.xs)), make([]float64, net.n)
	L := net.layers()
	for j := 0; j < steps; j++ {
		mamlMSE(net.forward(th, p.xs, sp), p.ys, sp.dels[L])
		mamlMasks(h, net, sp)
		clear(grad)
		net.backward(th, sp, grad)
		mamlAxpy(-alpha, grad, th)
	}
	qp := net.newPass(len(p.xq))
	loss := mamlMSE(net.forward(th, p.xq, qp), p.yq, qp.dels[L])
	mamlMasks(h, net, qp)
	return loss, h.Sum64()
}

// TestMAMLMetaGradientFiniteDifferences checks the meta-gradient, second
// order through the inner SGD steps, against central differences of the
// whole inner-loop-then-query-loss function in every parameter, and checks
// that first-order MAML's gradient misses by far more than the tolerance
// (so the check can tell the two apart).
func TestMAMLMetaGradientFiniteDifferences(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hidden []int
		steps  int
		alpha  float64
	}{
		{"no inner step", []int{40, 40}, 0, 0.01},
		{"[40,40] 1 step", []int{40, 40}, 1, 0.01},
		{"[40,40] 3 steps", []int{40, 40}, 3, 0.01},
		{"[8,6,5] 2 steps", []int{8, 6, 5}, 2, 0.1},
		{"linear 2 steps", nil, 2, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newMAMLGradProblem(tc.hidden, 5, 10, 3)
			net := p.net
			w := newMAMLTaskWork(net, tc.steps, len(p.xs), len(p.xq))
			g, fo := make([]float64, net.n), make([]float64, net.n)
			loss := w.metaGrad(net, p.theta, p.xs, p.ys, p.xq, p.yq, tc.alpha, false, g)
			w.metaGrad(net, p.theta, p.xs, p.ys, p.xq, p.yq, tc.alpha, true, fo)
			f0, sig0 := p.metaLoss(p.theta, tc.steps, tc.alpha)
			if math.Abs(loss-f0) > 1e-12*math.Max(1, f0) {
				t.Fatalf("metaGrad's loss %v, forward-only %v", loss, f0)
			}
			const h = 1e-6
			th := append([]float64(nil), p.theta...)
			var scale, errSO, errFO float64
			skipped := 0
			for i := range th {
				th[i] = p.theta[i] + h
				fp, sp := p.metaLoss(th, tc.steps, tc.alpha)
				th[i] = p.theta[i] - h
				fm, sm := p.metaLoss(th, tc.steps, tc.alpha)
				th[i] = p.theta[i]
				if sp != sig0 || sm != sig0 {
					skipped++
					continue
				}
				fd := (fp - fm) / (2 * h)
				scale = math.Max(scale, math.Abs(fd))
				errSO = math.Max(errSO, math.Abs(fd-g[i]))
				errFO = math.Max(errFO, math.Abs(fd-fo[i]))
			}
			if skipped > net.n/100 {
				t.Fatalf("%d of %d differences crossed a ReLU kink", skipped, net.n)
			}
			t.Logf("max |FD − grad|: %.2e (second order), %.2e (first order); max |grad| %.2e; %d kink crossings skipped", errSO, errFO, scale, skipped)
			if errSO > 1e-6*scale {
				t.Errorf("second-order meta-gradient is off by %.3g (largest component %.3g)", errSO, scale)
			}
			if tc.steps == 0 {
				if errFO != errSO {
					t.Errorf("without inner steps first and second order differ")
				}
			} else if errFO < 1e-3*scale {
				t.Errorf("first-order gradient is within %.3g of the exact one: the check cannot see second-order terms", errFO)
			}
		})
	}
}

// TestMAMLHessianVectorProduct checks H·v against central differences of
// the support-loss gradient along v.
func TestMAMLHessianVectorProduct(t *testing.T) {
	p := newMAMLGradProblem([]int{40, 40}, 5, 10, 11)
	net, L := p.net, p.net.layers()
	rng := rand.New(rand.NewPCG(5, 5))
	v := make([]float64, net.n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	grad := func(theta []float64) ([]float64, *mamlPass, uint64) {
		ps := net.newPass(len(p.xs))
		mamlMSE(net.forward(theta, p.xs, ps), p.ys, ps.dels[L])
		g := make([]float64, net.n)
		net.backward(theta, ps, g)
		h := fnv.New64a()
		mamlMasks(h, net, ps)
		return g, ps, h.Sum64()
	}
	_, ps, sig := grad(p.theta)
	hv := make([]float64, net.n)
	net.hvp(p.theta, v, ps, net.newRPass(len(p.xs)), hv)
	const h = 1e-6
	tp, tm := append([]float64(nil), p.theta...), append([]float64(nil), p.theta...)
	mamlAxpy(h, v, tp)
	mamlAxpy(-h, v, tm)
	gp, _, sp := grad(tp)
	gm, _, sm := grad(tm)
	if sp != sig || sm != sig {
		t.Fatal("the difference crosses a ReLU kink; pick another seed")
	}
	var scale, e float64
	for i := range hv {
		fd := (gp[i] - gm[i]) / (2 * h)
		scale = math.Max(scale, math.Abs(fd))
		e = math.Max(e, math.Abs(fd-hv[i]))
	}
	t.Logf("max |FD − Hv| %.2e, max |Hv| %.2e", e, scale)
	if e > 1e-6*scale {
		t.Errorf("H·v is off by %.3g (largest component %.3g)", e, scale)
	}
}

func mamlTestConfig(shot, iters int) MAMLConfig {
	c := DefaultMAMLConfig(shot)
	c.Iters, c.EvalTasks = iters, 200
	return c
}

// trainMAML meta-trains a new model on sine tasks for c.Iters iterations.
func trainMAML(t testing.TB, c MAMLConfig, progress func(iter int, loss float64)) *MAMLModel {
	t.Helper()
	m, err := NewMAML(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Train(context.Background(), progress); err != nil {
		t.Fatal(err)
	}
	return m
}

// mamlName names the method c trains: MAML, or first-order MAML.
func mamlName(c MAMLConfig) string {
	if c.FirstOrder {
		return "fomaml"
	}
	return "maml"
}

// TestMAMLDeterministicAcrossWorkers trains with one and with several
// workers: the per-task gradients are reduced in task order, so the
// parameters agree to the bit.
func TestMAMLDeterministicAcrossWorkers(t *testing.T) {
	train := func(procs int) []float64 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		return trainMAML(t, mamlTestConfig(5, 20), nil).Params
	}
	a, b := train(1), train(4)
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			t.Fatalf("parameter %d: %v with one worker, %v with four", i, a[i], b[i])
		}
	}
}

// TestMAMLSaveLoadResume saves midway, loads and continues: the result is
// the uninterrupted run's, bit for bit, and the loaded model predicts as
// the saved one.
func TestMAMLSaveLoadResume(t *testing.T) {
	ctx := context.Background()
	whole := trainMAML(t, mamlTestConfig(5, 40), nil)
	half := trainMAML(t, mamlTestConfig(5, 20), nil)
	dir := t.TempDir()
	if err := half.Save(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != FileMAML {
		t.Fatalf("run directory holds %v, want only %s", entries, FileMAML)
	}
	loaded, err := LoadMAML(dir)
	if err != nil {
		t.Fatal(err)
	}
	xs, ys, xq := []float64{-3, 0, 2}, []float64{1, 0.5, -1}, []float64{-4, 1, 4.5}
	a, b := half.Predict(xs, ys, xq, 10), loaded.Predict(xs, ys, xq, 10)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("loaded model predicts %v, saved one %v", b, a)
		}
	}
	loaded.Cfg.Iters = 40
	if err := loaded.Train(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i := range whole.Params {
		if whole.Params[i] != loaded.Params[i] {
			t.Fatalf("resumed run differs at parameter %d: %v vs %v", i, loaded.Params[i], whole.Params[i])
		}
	}
	os.WriteFile(filepath.Join(dir, FileMAML), []byte("{"), 0o644)
	if _, err := LoadMAML(dir); err == nil {
		t.Error("a damaged model file loaded without error")
	}
}

// TestMAMLEvaluateProtocol checks the evaluation against the task family:
// the untrained network (MAML's sd-0.01 start predicts ≈ 0) without
// adaptation must score E[y²] = E[A²]/2 ≈ 4.25 within its interval, and
// Predict on the first evaluation task must reproduce its per-task MSE.
func TestMAMLEvaluateProtocol(t *testing.T) {
	c := mamlTestConfig(5, 0)
	c.TestInnerSteps = 0
	m, err := NewMAML(c)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := m.Evaluate(1000, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	const want = (125 - 0.001) / (3 * 4.9) / 2 // E[A²]/2, A ~ U[0.1, 5]
	t.Log(ev)
	if ev.Metric != "mse" || ev.Tasks != 1000 || ev.Query != 100 || len(ev.PerTask) != 1000 {
		t.Fatalf("result %+v", ev)
	}
	if math.Abs(ev.Mean-want) > 1.5*ev.CI95 {
		t.Errorf("untrained MSE %.3f ± %.3f, want about %.3f", ev.Mean, ev.CI95, want)
	}

	// The first evaluation task, drawn as Evaluate draws it.
	m.Cfg.TestInnerSteps = 10
	ev, err = m.Evaluate(3, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	var b task.Batch
	b.Resize(3, 5, 100, 1, 1)
	datasets.Sine{}.Sample(task.Stream(1, mamlStreamEvalTasks, 0), &b)
	pred := m.Predict(b.XS[:5], b.YS[:5], b.XQ[:100], 10)
	var se float64
	for i, y := range b.YQ[:100] {
		se += (pred[i] - y) * (pred[i] - y)
	}
	if math.Abs(se/100-ev.PerTask[0]) > 1e-12 {
		t.Errorf("Predict gives MSE %v on the first evaluation task, Evaluate %v", se/100, ev.PerTask[0])
	}
}

// TestMAMLLearns runs a short meta-training of both orders: the adapted
// MSE must fall well below the untrained model's on the same tasks, and
// the trained initialization must gain from its ten test-time steps.
func TestMAMLLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds")
	}
	const iters, tasks = 2000, 200
	untrained, err := NewMAML(mamlTestConfig(5, 0))
	if err != nil {
		t.Fatal(err)
	}
	base, err := untrained.Evaluate(tasks, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, fo := range []bool{false, true} {
		c := mamlTestConfig(5, iters)
		c.FirstOrder = fo
		var calls, last int
		m := trainMAML(t, c, func(iter int, loss float64) { calls++; last = iter })
		if calls != iters || last != iters || m.Iter != iters {
			t.Fatalf("progress called %d times, last at %d; model at %d", calls, last, m.Iter)
		}
		ev, err := m.Evaluate(tasks, 100, 1)
		if err != nil {
			t.Fatal(err)
		}
		m.Cfg.TestInnerSteps = 0
		ev0, err := m.Evaluate(tasks, 100, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s after %d iterations: adapted %v, unadapted %v, untrained %v", mamlName(c), iters, ev, ev0, base)
		if ev.Mean > 0.8*base.Mean {
			t.Errorf("%s: eval MSE %.3f, untrained %.3f", mamlName(c), ev.Mean, base.Mean)
		}
		if ev.Mean > 0.9*ev0.Mean {
			t.Errorf("%s: adapted MSE %.3f, without adaptation %.3f", mamlName(c), ev.Mean, ev0.Mean)
		}
	}
}

// TestMAMLThroughRunner runs the MAML baseline as the command line and
// the workbench do (DefaultBaselines): a cancelled run keeps its model and
// writes no summary; continued, the runner writes summary.json in the
// engine's format and fits.json from the baseline's predictions, and a
// rerun reuses the run.
func TestMAMLThroughRunner(t *testing.T) {
	dir := t.TempDir()
	o := Options{Experiment: Shots, Preset: "sine-5shot", Variants: []string{MAML}, Shots: []int{3}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &Runner{Dir: dir, Options: o, Overrides: tiny(10), Baselines: DefaultBaselines(),
		Progress: func(p Progress) {
			if p.Phase == PhaseTrain {
				cancel()
			}
		}}
	if _, err := r.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	run := filepath.Join(dir, "runs", "maml-shot3-s1")
	if m, err := LoadMAML(run); err != nil || m.Iter != 0 {
		t.Fatalf("cancelled run saved %v, %+v", err, m)
	}
	if exists(filepath.Join(run, engine.FileSummary)) {
		t.Error("a cancelled run wrote a summary")
	}

	var phases []string
	r = &Runner{Dir: dir, Options: o, Overrides: tiny(10), Baselines: DefaultBaselines(),
		Progress: func(p Progress) { phases = append(phases, p.Phase) }}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var s engine.Summary
	if err := readJSON(filepath.Join(run, engine.FileSummary), &s); err != nil {
		t.Fatal(err)
	}
	if s.Preset != "sine-3shot" || s.Variant != MAML || s.Iters != 10 || s.Eval == nil || s.Eval.Metric != "mse" || s.Eval.Tasks != 8 ||
		len(res.Points) != 1 || s.Eval.Mean != res.Points[0].Mean {
		t.Errorf("summary %+v, points %+v", s, res.Points)
	}
	if m, err := LoadMAML(run); err != nil || m.Iter != 10 {
		t.Errorf("model after the run: %v, %+v", err, m)
	}
	var ff FitFile
	if err := readJSON(filepath.Join(run, FileFits), &ff); err != nil || ff.Variant != MAML || len(ff.Fits) != FitTasks || len(ff.Fits[0].PredMean) != len(ff.Fits[0].GridX) {
		t.Errorf("fits.json: %v, %+v", err, ff)
	}
	rows, err := runfile.Read[engine.MetricsRow](filepath.Join(run, engine.FileMetrics))
	if err != nil || len(rows) != 2 || rows[1].Iter != 10 {
		t.Errorf("metrics.jsonl: %v, %+v", err, rows)
	}
	phases = nil
	if _, err := r.Run(context.Background()); err != nil || !slices.Contains(phases, PhaseReuse) || slices.Contains(phases, PhaseTrain) {
		t.Errorf("rerun: %v, phases %v", err, phases)
	}
}

func TestMAMLConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*MAMLConfig)
	}{
		{"shot", func(c *MAMLConfig) { c.Shot = 0 }},
		{"meta batch", func(c *MAMLConfig) { c.MetaBatch = -1 }},
		{"query", func(c *MAMLConfig) { c.Query = 0 }},
		{"inner steps", func(c *MAMLConfig) { c.InnerSteps = -1 }},
		{"inner lr", func(c *MAMLConfig) { c.InnerLR = math.NaN() }},
		{"outer lr", func(c *MAMLConfig) { c.OuterLR = 0 }},
		{"eval", func(c *MAMLConfig) { c.EvalQuery = 0 }},
		{"hidden", func(c *MAMLConfig) { c.Hidden = []int{40, 0} }},
	} {
		c := DefaultMAMLConfig(5)
		tc.edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrMAMLConfig) {
			t.Errorf("%s: Validate = %v, want ErrMAMLConfig", tc.name, err)
		}
	}
	if err := DefaultMAMLConfig(5).Validate(); err != nil {
		t.Error(err)
	}
}

// BenchmarkMAMLStep is one meta-training step (25 tasks, forward, backward,
// the Hessian-vector products of second order, Adam) at the sine-5shot
// sizes, on all GOMAXPROCS cores. cpu-ms/step is the CPU time of all
// cores per step: on a machine shared with other jobs wall time counts
// their work too.
func BenchmarkMAMLStep(b *testing.B) {
	for _, fo := range []bool{false, true} {
		c := DefaultMAMLConfig(5)
		c.FirstOrder = fo
		b.Run(mamlName(c), func(b *testing.B) {
			c.Iters = 0
			m, err := NewMAML(c)
			if err != nil {
				b.Fatal(err)
			}
			m.Cfg.Iters = b.N
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := mamlCPUTime()
			if err := m.Train(context.Background(), nil); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(1000*b.Elapsed().Seconds()/float64(b.N), "ms/step")
			if cpu := mamlCPUTime() - cpu0; cpu > 0 {
				b.ReportMetric(1000*cpu.Seconds()/float64(b.N), "cpu-ms/step")
			}
		})
	}
}

// TestMAMLStreamsMatchEngine checks the copy of the engine's stream scheme
// through the one stream the engine exposes: the display tasks
// (Model.Display draws task i from stream 6, index i, as the evaluation
// draws its tasks from stream 4, index 0).
func TestMAMLStreamsMatchEngine(t *testing.T) {
	const streamDisplayTask = 6
	p, err := presets.Get("sine-5shot")
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.Config
	cfg.Seed = 12345
	if err := cfg.ApplyVariant("rbf", 0); err != nil {
		t.Fatal(err)
	}
	m, err := engine.NewModel(cfg, datasets.Sine{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d, err := m.Display(0, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	var b task.Batch
	b.Resize(1, cfg.Shot, len(d.GridX), 1, 1)
	datasets.Sine{}.SampleCurve(task.Stream(cfg.Seed, streamDisplayTask, 3), &b, d.GridX)
	for i := range b.XS {
		if b.XS[i] != d.SupportX[i] || b.YS[i] != d.SupportY[i] {
			t.Fatalf("support %v/%v, engine's %v/%v", b.XS, b.YS, d.SupportX, d.SupportY)
		}
	}
}
