package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/task"
	"github.com/mkbench/mkbench/internal/testutil"
)

func readSummary(t *testing.T, dir string) Summary {
	t.Helper()
	var s Summary
	if err := json.Unmarshal(testutil.ReadFile(t, filepath.Join(dir, FileSummary)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// stopAt runs cfg in dir until iteration n, then stops it as a kill after
// a checkpoint would: the checkpoint is at n.
func stopAt(t *testing.T, cfg Config, src task.Source, opts RunOptions, n int) {
	t.Helper()
	opts.ReportEvery = time.Nanosecond
	res, err := Run(context.Background(), cfg, src, opts, ObserverFunc(func(s Snapshot) error {
		if s.Iter >= n {
			return ErrStopped
		}
		return nil
	}))
	if !errors.Is(err, ErrStopped) || res.Iters != n {
		t.Fatalf("stop at %d: %v after %d iterations", n, err, res.Iters)
	}
}

// Fault 1: a second process cannot use a run directory another holds,
// and changes nothing in it.
func TestRunLocksItsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cfg := tinyConfig("rff", 3)
	lock, err := runfile.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, resume := range []bool{false, true} {
		_, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Dir: dir, Resume: resume}, nil)
		if !errors.Is(err, runfile.ErrInUse) || !strings.Contains(err.Error(), "in use by pid") {
			t.Fatalf("resume %v: want the directory in use, got %v", resume, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FileConfig)); err == nil {
		t.Fatal("a refused run wrote config.json")
	}
	lock.Release()
	runTo(t, cfg, sineLike{}, dir, nil)
	// Released when Run returns.
	lock, err = LockRun(dir)
	if err != nil {
		t.Fatalf("the run kept its lock: %v", err)
	}
	lock.Release()
}

// Fault 2: a run stopped before its first periodic checkpoint resumes (from
// the iteration-0 checkpoint, or from config.json alone) or starts over,
// and ends with an uninterrupted run's bytes.
func TestRunStoppedAtIterationZeroResumes(t *testing.T) {
	cfg := tinyConfig("vrf+ctx", 12)
	root := t.TempDir()
	full := filepath.Join(root, "full")
	want := runTo(t, cfg, sineLike{}, full, nil)
	wantRows := testutil.ReadFile(t, filepath.Join(full, FileMetrics))

	check := func(t *testing.T, dir string, got Result) {
		t.Helper()
		if rows := testutil.ReadFile(t, filepath.Join(dir, FileMetrics)); !bytes.Equal(rows, wantRows) {
			t.Fatalf("metrics differ:\n%s\n---\n%s", rows, wantRows)
		}
		if got.Eval == nil || got.Eval.Mean != want.Eval.Mean || got.Eval.CI95 != want.Eval.CI95 {
			t.Fatalf("eval %v, uninterrupted %v", got.Eval, want.Eval)
		}
		if s := readSummary(t, dir); s.Eval.Mean != want.Eval.Mean || s.Final != readSummary(t, full).Final {
			t.Fatalf("summary eval %v final %+v", s.Eval, s.Final)
		}
	}

	// Interrupted before the first step: the checkpoint is at 0.
	dir := filepath.Join(root, "zero")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if ck, err := LoadCheckpoint(filepath.Join(dir, FileCheckpoint)); err != nil || ck.Iter != 0 {
		t.Fatalf("want a checkpoint at iteration 0: %v, %v", ck, err)
	}
	got, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir, Resume: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(t, dir, got)

	// Killed before any checkpoint (as an older mkbench left it): config.json
	// and some rows, no checkpoint.
	for _, resume := range []bool{true, false} {
		dir := filepath.Join(root, map[bool]string{true: "resume", false: "rerun"}[resume])
		stopAt(t, cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir}, 7)
		os.Remove(filepath.Join(dir, FileCheckpoint))
		got, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir, Resume: resume}, nil)
		if err != nil {
			t.Fatalf("resume %v: %v", resume, err)
		}
		if len(got.Notes) == 0 {
			t.Fatalf("resume %v: the start over is not noted", resume)
		}
		check(t, dir, got)
	}
	// A directory with neither is not a run.
	empty := filepath.Join(root, "empty")
	os.MkdirAll(empty, 0o755)
	if _, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Dir: empty, Resume: true}, nil); err == nil || !strings.Contains(err.Error(), "not a run directory") {
		t.Fatalf("want not a run directory, got %v", err)
	}
}

// Fault 3: resuming a finished run changes nothing; a run stopped during
// its final evaluation resumes into it with the true final metrics,
// ms/iter and best validation.
func TestResumeFinishedOrEvaluatingRun(t *testing.T) {
	cfg := classConfig("vrf", 0.9)
	cfg.Iters, cfg.ValEvery, cfg.ValTasks, cfg.LogEvery = 12, 5, 6, 5
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 6, 3, 1
	src := blobs{way: 3, side: 7}
	opts := func(dir string) RunOptions { return RunOptions{Preset: "test", Dir: dir, Val: src, Test: src} }
	root := t.TempDir()
	full := filepath.Join(root, "full")
	if _, err := Run(context.Background(), cfg, src, opts(full), nil); err != nil {
		t.Fatal(err)
	}
	before := testutil.ReadFile(t, filepath.Join(full, FileSummary))
	o := opts(full)
	o.Resume = true
	res, err := Run(context.Background(), Config{}, src, o, nil)
	if err != nil || !res.AlreadyDone || len(res.Notes) == 0 || res.Eval == nil || res.Iters != cfg.Iters {
		t.Fatalf("resume of a finished run: %+v, %v", res, err)
	}
	if !bytes.Equal(before, testutil.ReadFile(t, filepath.Join(full, FileSummary))) {
		t.Fatal("resuming a finished run rewrote summary.json")
	}

	// Stopped after training, before the evaluation finished.
	part := filepath.Join(root, "part")
	o = opts(part)
	o.SkipEval = true
	if _, err := Run(context.Background(), cfg, src, o, nil); err != nil {
		t.Fatal(err)
	}
	o = opts(part)
	o.Resume = true
	if _, err := Run(context.Background(), Config{}, src, o, nil); err != nil {
		t.Fatal(err)
	}
	a, b := readSummary(t, full), readSummary(t, part)
	if a.Final != b.Final || b.Final.Loss == 0 {
		t.Fatalf("final metrics %+v, uninterrupted %+v", b.Final, a.Final)
	}
	if b.MsPerIter <= 0 {
		t.Fatalf("ms_per_iter %v", b.MsPerIter)
	}
	if a.Eval.Mean != b.Eval.Mean || a.Eval.CI95 != b.Eval.CI95 {
		t.Fatalf("eval %v, uninterrupted %v", b.Eval, a.Eval)
	}
	if b.BestVal == nil || b.BestVal.String() != a.BestVal.String() || b.BestVal.CI95 != a.BestVal.CI95 || b.BestVal.Query == 0 || b.BestVal.Draws == 0 || a.BestIter != b.BestIter {
		t.Fatalf("best_val %+v (iter %d), uninterrupted %+v (iter %d)", b.BestVal, b.BestIter, a.BestVal, a.BestIter)
	}
	if va, vb := testutil.ReadFile(t, filepath.Join(full, FileVal)), testutil.ReadFile(t, filepath.Join(part, FileVal)); bytes.Count(va, []byte("\n")) != bytes.Count(vb, []byte("\n")) {
		t.Fatalf("val.jsonl rows differ:\n%s\n---\n%s", vb, va)
	}
}

// Fault 4: every damage to a checkpoint file is caught and named.
func TestDamagedCheckpointIsCaught(t *testing.T) {
	dir := t.TempDir()
	runTo(t, tinyConfig("rff", 2), sineLike{}, dir, nil)
	path := filepath.Join(dir, FileCheckpoint)
	good := testutil.ReadFile(t, path)
	if _, err := LoadCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	n := len(good)
	var cases []int
	for i := 0; i < checkpointHeader; i++ {
		cases = append(cases, i)
	}
	cases = append(cases, checkpointHeader, checkpointHeader+1, n/2, n/2+1, n-2, n-1)
	bad := filepath.Join(dir, FileBest)
	expect := func(what string, data []byte) {
		t.Helper()
		os.WriteFile(bad, data, 0o600)
		_, err := LoadCheckpoint(bad)
		if !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: want an error naming %s, got %v", what, bad, err)
		}
	}
	for _, i := range cases {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			d := append([]byte(nil), good...)
			d[i] ^= mask
			expect("flip at "+itoa(i), d)
		}
	}
	for _, cut := range []int{0, 5, checkpointHeader - 1, checkpointHeader, n / 2, n - 1} {
		expect("truncated to "+itoa(cut), good[:cut])
	}
	expect("appended", append(append([]byte(nil), good...), 0))
	expect("legacy without header", good[checkpointHeader:])
}

func itoa(i int) string { return strconv.Itoa(i) }

// Fault 5: a resume refuses logs that do not match the checkpoint, changing
// nothing; with Repair it keeps the good rows and records the gap.
func TestResumeChecksLogs(t *testing.T) {
	cfg := tinyConfig("rff", 30)
	cfg.CheckpointSec = 0
	root := t.TempDir()
	orig := filepath.Join(root, "orig")
	stopAt(t, cfg, sineLike{}, RunOptions{Dir: orig}, 22) // rows 5, 10, 15, 20; checkpoint 22
	rows := testutil.ReadFile(t, filepath.Join(orig, FileMetrics))
	lines := strings.SplitAfter(string(rows), "\n")
	if len(lines) < 5 {
		t.Fatalf("rows:\n%s", rows)
	}
	for _, tc := range []struct {
		name, content string
		del           bool
		want          string
	}{
		{"garbled", lines[0] + "{\"iter\":1x\n" + strings.Join(lines[2:], ""), false, "line 2"},
		{"cut mid-file", lines[0] + lines[1][:10], false, "15, 20"},
		{"duplicated", lines[0] + lines[0] + strings.Join(lines[1:], ""), false, "line 2"},
		{"deleted", "", true, "file is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, strings.ReplaceAll(tc.name, " ", "-"))
			os.MkdirAll(dir, 0o755)
			for _, f := range []string{FileConfig, FileCheckpoint} {
				os.WriteFile(filepath.Join(dir, f), testutil.ReadFile(t, filepath.Join(orig, f)), 0o600)
			}
			mp := filepath.Join(dir, FileMetrics)
			if !tc.del {
				os.WriteFile(mp, []byte(tc.content), 0o644)
			}
			_, err := Run(context.Background(), Config{}, sineLike{}, RunOptions{Dir: dir, Resume: true}, nil)
			if !errors.Is(err, ErrDamagedLog) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--repair") {
				t.Fatalf("want a refusal naming %q, got %v", tc.want, err)
			}
			if got, _ := os.ReadFile(mp); string(got) != tc.content {
				t.Fatalf("a refused resume changed metrics.jsonl:\n%s", got)
			}
			res, err := Run(context.Background(), Config{}, sineLike{}, RunOptions{Dir: dir, Resume: true, Repair: true}, nil)
			if err != nil || len(res.Notes) == 0 {
				t.Fatalf("repair: %v, notes %v", err, res.Notes)
			}
			gaps, err := runfile.Read[GapRecord](filepath.Join(dir, FileGaps))
			if err != nil || len(gaps) != 1 || gaps[0].File != FileMetrics || gaps[0].CheckpointIter != 22 {
				t.Fatalf("gaps.jsonl: %+v, %v", gaps, err)
			}
			got := testutil.ReadFile(t, mp)
			// Every good row kept, the later ones computed again.
			if !bytes.HasPrefix(got, []byte(lines[0])) && !tc.del {
				t.Fatalf("first row lost:\n%s", got)
			}
			if !bytes.HasSuffix(got, []byte(lines[len(lines)-2])) && !strings.HasSuffix(string(got), "\n") {
				t.Fatalf("rows:\n%s", got)
			}
		})
	}
	// A row cut by a kill past the checkpoint, and rows past it, are not damage.
	dir := filepath.Join(root, "tail")
	os.MkdirAll(dir, 0o755)
	for _, f := range []string{FileConfig, FileCheckpoint} {
		os.WriteFile(filepath.Join(dir, f), testutil.ReadFile(t, filepath.Join(orig, f)), 0o600)
	}
	os.WriteFile(filepath.Join(dir, FileMetrics), append(append([]byte(nil), rows...), `{"iter":25,"loss":1}`+"\n"+`{"iter":3`...), 0o644)
	if _, err := Run(context.Background(), Config{}, sineLike{}, RunOptions{Dir: dir, Resume: true}, nil); err != nil {
		t.Fatal(err)
	}
}

// Fault 6: best.gob is checked before training; a missing one is rebuilt
// and noted; LoadEvalCheckpoint says which checkpoint it gives and why.
func TestBestCheckpointChecks(t *testing.T) {
	cfg := classConfig("vrf", 0.9)
	cfg.Iters, cfg.ValEvery, cfg.ValTasks, cfg.LogEvery = 14, 5, 6, 5
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 6, 3, 1
	cfg.CheckpointSec = 0
	src := blobs{way: 3, side: 7}
	root := t.TempDir()
	opts := func(dir string) RunOptions { return RunOptions{Dir: dir, Val: src, Test: src} }
	prep := func(name string) string {
		dir := filepath.Join(root, name)
		stopAt(t, cfg, src, opts(dir), 11)
		return dir
	}

	dir := prep("damaged")
	best := filepath.Join(dir, FileBest)
	d := testutil.ReadFile(t, best)
	d[len(d)/2] ^= 0x10
	os.WriteFile(best, d, 0o600)
	ckBefore := testutil.ReadFile(t, filepath.Join(dir, FileCheckpoint))
	metricsBefore := testutil.ReadFile(t, filepath.Join(dir, FileMetrics))
	o := opts(dir)
	o.Resume = true
	_, err := Run(context.Background(), Config{}, src, o, nil)
	if !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), best) || !strings.Contains(err.Error(), "before training") {
		t.Fatalf("want best.gob refused at start, got %v", err)
	}
	// Refused before training: no step ran, so neither the checkpoint nor
	// the metrics moved.
	if !bytes.Equal(ckBefore, testutil.ReadFile(t, filepath.Join(dir, FileCheckpoint))) || !bytes.Equal(metricsBefore, testutil.ReadFile(t, filepath.Join(dir, FileMetrics))) {
		t.Fatal("the refused resume trained")
	}
	if _, _, _, err := LoadEvalCheckpoint(dir); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("LoadEvalCheckpoint of a damaged best.gob: %v", err)
	}
	o.Repair = true
	res, err := Run(context.Background(), Config{}, src, o, nil)
	if err != nil || len(res.Notes) == 0 {
		t.Fatalf("repair: %v %v", err, res.Notes)
	}
	if s := readSummary(t, dir); s.EvalCheckpoint != "best" || s.BestIter <= 11 {
		t.Fatalf("summary after rebuilt best: %q at %d", s.EvalCheckpoint, s.BestIter)
	}

	dir = prep("missing")
	os.Remove(filepath.Join(dir, FileBest))
	ck, which, note, err := LoadEvalCheckpoint(dir)
	if err != nil || which != "last" || ck.Iter != 11 || !strings.Contains(note, "best.gob is missing") {
		t.Fatalf("LoadEvalCheckpoint without best.gob: %v %q %q %v", ck, which, note, err)
	}
	o = opts(dir)
	o.Resume = true
	res, err = Run(context.Background(), Config{}, src, o, nil)
	if err != nil || len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "rebuilt") {
		t.Fatalf("resume without best.gob: %v %v", err, res.Notes)
	}
	if _, which, note, err := LoadEvalCheckpoint(dir); err != nil || which != "best" || note != "" {
		t.Fatalf("after the rebuild: %q %q %v", which, note, err)
	}
}

// nanInputs yields a NaN support input from its n-th batch on: the kernel
// matrix of the KRR solve turns NaN inside gorgonia's machine.
type nanInputs struct {
	sineLike
	n, calls int
}

func (s *nanInputs) Sample(rng *rand.Rand, b *task.Batch) {
	s.sineLike.Sample(rng, b)
	if s.calls++; s.calls > s.n {
		b.XS[0] = math.NaN()
	}
}

// Fault 7: a value that turns non-finite inside a step is a divergence at
// that iteration, naming the value and the kept checkpoint, with advice
// the command line takes.
func TestDivergenceInsideTheSolve(t *testing.T) {
	for _, v := range []string{"rff", "vrf"} {
		t.Run(v, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			cfg := tinyConfig(v, 20)
			cfg.LR = 0.01
			_, err := Run(context.Background(), cfg, &nanInputs{n: 3}, RunOptions{Dir: dir}, nil)
			if err == nil || !errors.Is(err, ErrDiverged) {
				t.Fatalf("want a divergence, got %v", err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{"training diverged at iteration ", "not finite", "last good checkpoint (iteration 0)", "--set lr=0.005", "--set clip_norm=1"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q: %s", want, msg)
				}
			}
			for _, bad := range []string{"PC ", "Failed to execute", "--lr"} {
				if strings.Contains(msg, bad) {
					t.Errorf("error has %q: %s", bad, msg)
				}
			}
		})
	}
}
