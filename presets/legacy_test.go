package presets

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/testutil"
)

// A run written by mkbench before checkpoint checksums (testdata/
// legacy-run-rbf: `mkbench run --preset sine-5shot --variant rbf --iters
// 30 --eval-tasks 10` by the build before format 2) stays usable: it loads
// as unverified, resumes with a note, continues exactly as an uninterrupted
// run does, and its next checkpoint is verified.
func TestLegacyRunResumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "legacy-run-rbf")
	testutil.CopyDir(t, filepath.Join("testdata", "legacy-run-rbf"), dir)
	ck, err := engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if !ck.Unverified() || ck.Iter != 30 {
		t.Fatalf("legacy checkpoint: unverified %v, iteration %d", ck.Unverified(), ck.Iter)
	}
	_, which, note, err := engine.LoadEvalCheckpoint(dir)
	if err != nil || which != "last" || !strings.Contains(note, "without checkpoint checksums") {
		t.Fatalf("eval checkpoint: %s %q %v", which, note, err)
	}

	_, cfg, err := Spec{Preset: "sine-5shot", Variant: "rbf", Overrides: Overrides{"iters": 60, "eval_tasks": 10}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := NewSources("sine", cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := engine.Run(context.Background(), engine.Config{Iters: 60}, srcs.Train, engine.RunOptions{Preset: "sine-5shot", Dir: dir, Resume: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "without checkpoint checksums") {
		t.Fatalf("resume notes %q do not mention the missing checksum", res.Notes)
	}
	fresh := t.TempDir()
	if _, err := engine.Run(context.Background(), cfg, srcs.Train, engine.RunOptions{Preset: "sine-5shot", Dir: fresh}, nil); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, engine.FileMetrics))
	b, _ := os.ReadFile(filepath.Join(fresh, engine.FileMetrics))
	if string(a) != string(b) {
		t.Fatalf("resumed legacy run's metrics differ from an uninterrupted run's:\n%s\nvs\n%s", a, b)
	}
	ck, err = engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
	if err != nil || ck.Unverified() {
		t.Fatalf("after the resume: unverified %v, %v", ck != nil && ck.Unverified(), err)
	}
}
