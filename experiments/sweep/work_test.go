package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
)

// newSweep makes a sweep directory for file in a temporary folder.
func newSweep(t *testing.T, file string) (string, Manifest) {
	t.Helper()
	f, err := ParseFile("t.yaml", []byte(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := Manifest{File: f, Units: f.Units(), Engine: "local"}
	if err := Create(dir, m, []byte(file)); err != nil {
		t.Fatal(err)
	}
	m, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

const smallSweep = "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [3]\niters: 120\neval_tasks: 10\n"

func TestWorkIsIdempotent(t *testing.T) {
	dir, m := newSweep(t, smallSweep)
	var log bytes.Buffer
	w := &Worker{Dir: dir, Log: &log}
	if err := w.Work(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, m.Units[0].Dir)
	var sum engine.Summary
	data, err := os.ReadFile(filepath.Join(unit, engine.FileSummary))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Preset != "sine-5shot" || sum.Variant != "vrf" || sum.Seed != 3 || sum.Iters != 120 {
		t.Fatalf("summary: preset %q variant %q seed %d iters %d", sum.Preset, sum.Variant, sum.Seed, sum.Iters)
	}
	before, _ := os.ReadFile(filepath.Join(unit, engine.FileMetrics))
	stat0, _ := os.Stat(filepath.Join(unit, engine.FileSummary))
	// Started again, a finished unit does nothing.
	if err := w.Work(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(unit, engine.FileMetrics))
	stat1, _ := os.Stat(filepath.Join(unit, engine.FileSummary))
	if !bytes.Equal(before, after) || !stat0.ModTime().Equal(stat1.ModTime()) {
		t.Error("a finished unit was changed by a second worker")
	}
	if !strings.Contains(log.String(), "finished earlier; nothing to do") {
		t.Errorf("log:\n%s", log.String())
	}
	st, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts[StateDone] != 1 || st.Units[0].Eval == nil || st.Units[0].Iter != 120 {
		t.Errorf("status %+v", st.Units[0])
	}
	if err := w.Work(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "no unit 1") {
		t.Errorf("index out of range: %v", err)
	}
}

// TestInterruptedUnitMatchesUninterrupted: a unit stopped mid-run and
// taken up again ends with the metrics.jsonl of a run never stopped.
func TestInterruptedUnitMatchesUninterrupted(t *testing.T) {
	file := "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [2]\niters: 1500\neval_tasks: 10\ngrid:\n  checkpoint_sec: [1]\n"
	whole, m := newSweep(t, file)
	if err := (&Worker{Dir: whole}).Work(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	cut, _ := newSweep(t, file)
	unit := filepath.Join(cut, m.Units[0].Dir)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Stop once a checkpoint past iteration 0 is on disk.
		for ctx.Err() == nil {
			if ck, err := engine.LoadCheckpoint(filepath.Join(unit, engine.FileCheckpoint)); err == nil && ck.Iter > 0 {
				cancel()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	err := (&Worker{Dir: cut}).Work(ctx, 0)
	cancel()
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("first part: %v, want ErrInterrupted", err)
	}
	if _, err := os.Stat(filepath.Join(unit, engine.FileSummary)); err == nil {
		t.Fatal("the unit finished before it was stopped; the test stops it too late")
	}
	if err := (&Worker{Dir: cut}).Work(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(whole, m.Units[0].Dir, engine.FileMetrics))
	b, _ := os.ReadFile(filepath.Join(unit, engine.FileMetrics))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("metrics.jsonl differ: uninterrupted %d bytes, interrupted and resumed %d bytes", len(a), len(b))
	}
	starts, _ := runfile.Read[Start](filepath.Join(unit, FileStarts))
	if len(starts) != 2 || starts[0].Iter != 0 || starts[1].Iter == 0 {
		t.Errorf("starts.jsonl: %+v", starts)
	}
}

// TestPermanentFailureIsNotRetried: a diverging unit is marked failed
// with its error, and a worker started again (a requeue) does not train it
// again; clearing failed.json (sweep resume) does.
func TestPermanentFailureIsNotRetried(t *testing.T) {
	dir, m := newSweep(t, "presets: [sine-5shot]\nvariants: [rff]\nseeds: [1]\niters: 200\neval_tasks: 10\ngrid:\n  lr: [1e12]\n")
	unit := filepath.Join(dir, m.Units[0].Dir)
	err := (&Worker{Dir: dir}).Work(context.Background(), 0)
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("error %v, want ErrFailed", err)
	}
	f, ok := engine.ReadFailure(unit)
	if !ok || !f.Permanent || !strings.Contains(f.Error, "diverged") {
		t.Fatalf("failed.json: %+v (present %v)", f, ok)
	}
	st, _ := ReadStatus(dir)
	if st.Units[0].State != StateFailed || st.Units[0].Error == "" {
		t.Errorf("status %+v", st.Units[0])
	}
	starts, _ := runfile.Read[Start](filepath.Join(unit, FileStarts))
	err = (&Worker{Dir: dir}).Work(context.Background(), 0)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "not retried") {
		t.Fatalf("second worker: %v", err)
	}
	again, _ := runfile.Read[Start](filepath.Join(unit, FileStarts))
	if len(again) != len(starts) {
		t.Error("a permanently failed unit was started again")
	}
}

// TestStalledUnitFails: a unit that starts maxStalls times from the same
// checkpoint is failed instead of being requeued forever.
func TestStalledUnitFails(t *testing.T) {
	dir, m := newSweep(t, smallSweep)
	unit := filepath.Join(dir, m.Units[0].Dir)
	if err := os.MkdirAll(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	for range maxStalls - 1 {
		if err := runfile.Append(filepath.Join(unit, FileStarts), Start{Iter: 0}, runfile.Shared); err != nil {
			t.Fatal(err)
		}
	}
	err := (&Worker{Dir: dir}).Work(context.Background(), 0)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "without saving a later checkpoint") {
		t.Fatalf("error %v", err)
	}
}

// TestWorkWaitsForLiveOwner: a unit another worker holds is not trained
// twice; the second worker waits, and gives up after LockWait naming the
// owner.
func TestWorkWaitsForLiveOwner(t *testing.T) {
	dir, m := newSweep(t, smallSweep)
	unit := filepath.Join(dir, m.Units[0].Dir)
	held, err := runfile.Lock(unit)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := ReadStatus(dir)
	if st.Units[0].State != StateRunning || st.Units[0].Owner == nil || st.Units[0].Owner.PID != os.Getpid() {
		t.Errorf("a held unit's status: %+v", st.Units[0])
	}
	err = (&Worker{Dir: dir, LockWait: 1500 * time.Millisecond}).Work(context.Background(), 0)
	if !errors.Is(err, runfile.ErrInUse) || !strings.Contains(err.Error(), "in use by pid") {
		t.Fatalf("error %v", err)
	}
	// Released while the second worker waits: it goes on.
	go func() {
		time.Sleep(500 * time.Millisecond)
		held.Release()
	}()
	if err := (&Worker{Dir: dir, LockWait: time.Minute}).Work(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}

func TestCancelledSweepStartsNothing(t *testing.T) {
	dir, m := newSweep(t, smallSweep)
	if _, _, err := CancelAll(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if err := (&Worker{Dir: dir}).Work(context.Background(), 0); !errors.Is(err, ErrCancelled) {
		t.Fatalf("error %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, m.Units[0].Dir)); err == nil {
		t.Error("a cancelled sweep's unit was started")
	}
	if err := Uncancel(dir); err != nil {
		t.Fatal(err)
	}
	if err := (&Worker{Dir: dir}).Work(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}

func TestCreateRefusesOtherSweep(t *testing.T) {
	dir, _ := newSweep(t, smallSweep)
	f, _ := ParseFile("t.yaml", []byte("presets: [sine-3shot]\n"), nil)
	err := Create(dir, Manifest{File: f, Units: f.Units()}, nil)
	if !errors.Is(err, ErrOtherSweep) {
		t.Fatalf("error %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileManifest), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Fatalf("damaged sweep.json: %v", err)
	}
}

func TestReportOverSeeds(t *testing.T) {
	dir, m := newSweep(t, "presets: [sine-5shot]\nvariants: [rbf]\nseeds: [1, 2, 3]\niters: 40\neval_tasks: 10\n")
	for i := range m.Units[:2] {
		if err := (&Worker{Dir: dir}).Work(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Report(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Done != 2 || len(res.Rows) != 1 || len(res.Rows[0].Seeds) != 2 || res.Rows[0].Planned != 3 {
		t.Fatalf("results %+v", res)
	}
	r := res.Rows[0]
	if want := (r.Seeds[0].Mean + r.Seeds[1].Mean) / 2; r.Mean != want || !(r.CI95 > 0) {
		t.Errorf("mean %g (want %g), ci %g", r.Mean, want, r.CI95)
	}
	for _, f := range []string{"results.json", "results.csv", "results.md", "figures/sweep-sine-5shot.png", "figures/sweep-sine-5shot.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "results.md"))
	if !strings.Contains(string(md), "2 of 3 units done") || !strings.Contains(string(md), "| 2/3 |") {
		t.Errorf("results.md:\n%s", md)
	}
}
