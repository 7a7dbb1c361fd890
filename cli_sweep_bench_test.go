package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/experiments/sweep"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/testutil"
	"github.com/mkbench/mkbench/presets"
)

// sweep12 is the 12-unit sine sweep of the timing comparison: four
// variants × three seeds, 2,000 iterations each.
const sweep12 = `presets: [sine-5shot]
variants: [rbf, rff, vrf, vrf+ctx]
seeds: [1, 2, 3]
iters: 2000
eval_tasks: 100
`

// BenchmarkSweepLocal12 times the 12-unit sine sweep on the local engine
// (one unit per core, each with its share of the cores) against the same
// units one after another (one at a time, each with every core).
//
//	go test . -run XXX -bench SweepLocal12 -benchtime 1x
func BenchmarkSweepLocal12(b *testing.B) {
	file := filepath.Join(b.TempDir(), "s12.yaml")
	if err := os.WriteFile(file, []byte(sweep12), 0o644); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		timed := func(jobs string) time.Duration {
			dir := filepath.Join(b.TempDir(), "jobs"+jobs)
			start := time.Now()
			if out, err := exec.Command(binary, "sweep", "run", file, "--out", dir, "--jobs", jobs, "--quiet").CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			return time.Since(start)
		}
		seq := timed("1")
		par := timed("2")
		b.ReportMetric(seq.Seconds(), "s-one-after-another")
		b.ReportMetric(par.Seconds(), "s-local-engine")
		b.ReportMetric(seq.Seconds()/par.Seconds(), "speedup")
	}
}

// BenchmarkSweepSlurmOverhead measures the cost of running a short unit
// as a Slurm array task rather than in a running process: the sbatch call
// (one per sweep, shared by its units), the wait in Slurm's queue until
// the worker starts, and the worker's own start-up (process, manifest,
// config, data, model) and end (checkpoint, summary) around the training
// and the evaluation — as shares of the unit's whole time from submission
// to its summary. It needs a cluster (MKBENCH_SLURM=1, see needSlurm).
//
//	go test . -run XXX -bench SweepSlurmOverhead -benchtime 1x
func BenchmarkSweepSlurmOverhead(b *testing.B) {
	if os.Getenv("MKBENCH_SLURM") == "" {
		b.Skip("needs MKBENCH_SLURM=1 and a cluster (.ci/slurm-cluster start)")
	}
	for _, c := range []struct{ name, file string }{
		{"sine", "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [1, 2, 3]\niters: 1000\neval_tasks: 100\nslurm:\n  max_parallel: 3\n"},
		{"omniglot", "presets: [omniglot-5w1s]\nvariants: [rbf]\nseeds: [1, 2, 3]\niters: 40\neval_tasks: 100\nslurm:\n  max_parallel: 3\n"},
	} {
		b.Run(c.name, func(b *testing.B) {
			file := filepath.Join(b.TempDir(), "s.yaml")
			if err := os.WriteFile(file, []byte(c.file), 0o644); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				dir := filepath.Join(b.TempDir(), "ov")
				start := time.Now()
				if out, err := exec.Command(binary, "sweep", "run", file, "--out", dir, "--engine", "slurm", "--quiet").CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				submit := time.Since(start)
				if out, err := exec.Command(binary, "sweep", "resume", dir, "--wait", "--quiet").CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				subs, _ := sweep.Submissions(dir)
				m, _ := sweep.Load(dir)
				var queue, worker, train, eval, whole float64
				for _, u := range m.Units {
					starts, _ := runfile.Read[sweep.Start](filepath.Join(dir, u.Dir, sweep.FileStarts))
					var sum engine.Summary
					readJSONFile(b, filepath.Join(dir, u.Dir, engine.FileSummary), &sum)
					if len(starts) == 0 || len(subs) == 0 {
						b.Fatalf("%s: no start or submission recorded", u.Name)
					}
					wall := sum.Finished.Sub(starts[0].Time).Seconds()
					queue += starts[0].Time.Sub(subs[0].Time).Seconds()
					worker += wall - sum.TrainSeconds - sum.EvalSeconds
					train += sum.TrainSeconds
					eval += sum.EvalSeconds
					whole += sum.Finished.Sub(subs[0].Time).Seconds()
				}
				n := float64(len(m.Units))
				perUnitSubmit := submit.Seconds() / n
				whole += submit.Seconds()
				b.ReportMetric(perUnitSubmit, "s-submit/unit")
				b.ReportMetric(queue/n, "s-queue/unit")
				b.ReportMetric(worker/n, "s-worker-overhead/unit")
				b.ReportMetric(train/n, "s-train/unit")
				b.ReportMetric(eval/n, "s-eval/unit")
				b.ReportMetric(100*(submit.Seconds()+queue+worker)/whole, "%-overhead")
			}
		})
	}
}

// BenchmarkUnitDataLoad is the data loading a worker does before it
// trains: the sources of a preset, read from the decoded cache.
func BenchmarkUnitDataLoad(b *testing.B) {
	for _, name := range []string{"sine-5shot", "omniglot-5w1s"} {
		b.Run(name, func(b *testing.B) {
			p, cfg, err := presets.Spec{Preset: name}.Config()
			if err != nil {
				b.Fatal(err)
			}
			data := ""
			if p.Source == "omniglot" {
				data = testutil.Data(b, "omniglot")
			}
			if _, err := presets.NewSources(p.Source, cfg, data); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := presets.NewSources(p.Source, cfg, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
