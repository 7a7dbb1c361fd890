package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/testutil"
)

// The tests of what mkbench may write and remove: only its own files, a
// run's record never (issue 41, class 1), and the odd inputs that lost
// one (a data path that is not UTF-8, read-only media).

// sineRun trains a tiny sine run into a new directory.
func sineRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if _, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--iters", "10", "--eval-tasks", "2", "--out", dir, "--quiet"); code != 0 {
		t.Fatalf("run: %s", se)
	}
	return dir
}

// export --out never lands on a run's files, however the path reaches
// them, and replaces an existing file only with --force.
func TestExportOutNeverOverwritesARun(t *testing.T) {
	dir := sineRun(t)
	ck := testutil.ReadFile(t, filepath.Join(dir, engine.FileCheckpoint))
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(dir, engine.FileSummary), filepath.Join(t.TempDir(), "sum"))
	for i, out := range []string{
		filepath.Join(dir, engine.FileCheckpoint),
		filepath.Join(link, engine.FileConfig),
		filepath.Join(dir, "nothing", "..", engine.FileMetrics),
		filepath.Join(dir, engine.FileCheckpoint+".tmp-12"),
	} {
		args := []string{"export", dir, "--format", "json", "--out", out}
		if i%2 == 1 {
			args = append(args, "--force") // not even with --force
		}
		so, se, code := mkbench(t, args...)
		oneLineError(t, "export --out "+out, so, se, code, "never writes over")
	}
	if string(testutil.ReadFile(t, filepath.Join(dir, engine.FileCheckpoint))) != string(ck) {
		t.Fatal("export overwrote the run's checkpoint")
	}
	out := filepath.Join(t.TempDir(), "table.csv")
	if _, se, code := mkbench(t, "export", dir, "--format", "csv", "--out", out); code != 0 {
		t.Fatalf("export: %s", se)
	}
	os.WriteFile(out, []byte("mine"), 0o644)
	so, se, code := mkbench(t, "export", dir, "--format", "csv", "--out", out)
	oneLineError(t, "export to an existing file", so, se, code, "add --force")
	if string(testutil.ReadFile(t, out)) != "mine" {
		t.Fatal("a refused export changed the file")
	}
	if _, se, code := mkbench(t, "export", dir, "--format", "csv", "--out", out, "--force"); code != 0 || string(testutil.ReadFile(t, out)) == "mine" {
		t.Fatalf("export --force: %d %s", code, se)
	}
}

// A garbled row in the middle of a log is left out of an export with a
// note naming its line; a last row cut by a kill is left out silently.
func TestExportNotesDamagedRows(t *testing.T) {
	dir := sineRun(t)
	path := filepath.Join(dir, engine.FileMetrics)
	lines := strings.SplitAfter(string(testutil.ReadFile(t, path)), "\n")
	garbled := lines[0] + "{\"iter\": 7, garbage\n" + strings.Join(lines[1:], "")
	os.WriteFile(path, []byte(garbled), 0o644)
	so, se, code := mkbench(t, "export", dir, "--format", "csv")
	if code != 0 || !strings.Contains(se, "1 damaged line left out") || !strings.Contains(se, "line 2 ") || !strings.Contains(so, "run,iter,metric,value") {
		t.Fatalf("export of a garbled log: exit %d, stderr %q", code, se)
	}
	os.WriteFile(path, []byte(strings.Join(lines, "")+`{"iter": 12, "lo`), 0o644)
	if _, se, code := mkbench(t, "export", dir, "--format", "csv"); code != 0 || se != "" {
		t.Fatalf("export of a log cut by a kill: exit %d, stderr %q", code, se)
	}
}

// A refused run --out leaves no lock file and no failed.json behind.
func TestRefusedOutLeavesNoTrace(t *testing.T) {
	dir := sineRun(t)
	os.Remove(filepath.Join(dir, runfile.FileLock)) // a copy of the run has none
	so, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--iters", "2", "--out", dir, "--quiet")
	oneLineError(t, "run --out a run", so, se, code, "already holds a run")
	for _, f := range []string{runfile.FileLock, engine.FileFailed} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("the refused run left %s", f)
		}
	}
}

// A run whose checkpoint.gob is lost after it validated is not retrained
// from 0 over its record: --resume is refused, and nothing changes.
func TestResumeWithoutCheckpointRefusedForAValidatedRun(t *testing.T) {
	dir := sineRun(t)
	os.Remove(filepath.Join(dir, engine.FileCheckpoint))
	os.Remove(filepath.Join(dir, engine.FileSummary))                                       // lost too, or stopped during the final evaluation
	os.WriteFile(filepath.Join(dir, engine.FileBest), []byte("the best parameters"), 0o600) // as a validated run has
	metrics := testutil.ReadFile(t, filepath.Join(dir, engine.FileMetrics))
	so, se, code := mkbench(t, "run", "--resume", dir, "--quiet")
	if code == 0 || !strings.Contains(se, "mkbench eval --run") {
		t.Fatalf("resume without the checkpoint: exit %d, %q %q", code, so, se)
	}
	if string(testutil.ReadFile(t, filepath.Join(dir, engine.FileMetrics))) != string(metrics) || string(testutil.ReadFile(t, filepath.Join(dir, engine.FileBest))) != "the best parameters" {
		t.Fatal("the refused resume changed the run's files")
	}
	// The way out it names: --start-over trains again from iteration 0,
	// the old record moved aside whole.
	if so, se, code := mkbench(t, "run", "--resume", dir, "--start-over", "--quiet"); code != 0 {
		t.Fatalf("--start-over (exit %d): %s%s", code, so, se)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "stopped-*"))
	if len(aside) != 1 || string(testutil.ReadFile(t, filepath.Join(aside[0], engine.FileMetrics))) != string(metrics) ||
		string(testutil.ReadFile(t, filepath.Join(aside[0], engine.FileBest))) != "the best parameters" {
		t.Fatalf("the old record was not kept whole beside the new run: %v", aside)
	}
	if _, err := os.Stat(filepath.Join(dir, engine.FileSummary)); err != nil {
		t.Fatalf("the run started over did not finish: %v", err)
	}
	if _, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--start-over"); code == 0 || !strings.Contains(se, "--start-over applies to --resume DIR only") {
		t.Fatalf("--start-over without --resume: exit %d, %q", code, se)
	}
}

// A data folder whose name is not UTF-8 is legal: the run records it so
// that --resume and eval --run find it again.
func TestNonUTF8DataPathResumesAndEvaluates(t *testing.T) {
	data := filepath.Join(t.TempDir(), "shap\xffes")
	writeShapes(t, data, 25, 6, true)
	run := filepath.Join(t.TempDir(), "run")
	args := []string{"run", "--preset", "folder-5w1s", "--data", data, "--iters", "2", "--image-size", "32", "--set", "conv_filters=4",
		"--set", "query=2", "--set", "eval_query=2", "--eval-tasks", "4", "--set", "val_every=0", "--out", run, "--quiet"}
	if so, se, code := mkbench(t, args...); code != 0 {
		t.Fatalf("run (exit %d): %s%s", code, so, se)
	}
	if rc, err := engine.ReadRunConfig(run); err != nil || rc.Data != data {
		t.Fatalf("config.json's data %q, %v", rc.Data, err)
	}
	if so, se, code := mkbench(t, "run", "--resume", run, "--iters", "3", "--quiet"); code != 0 {
		t.Fatalf("resume (exit %d): %s%s", code, so, se)
	}
	if so, se, code := mkbench(t, "eval", "--run", run); code != 0 || !strings.Contains(so, "matches summary.json") {
		t.Fatalf("eval --run (exit %d): %s%s", code, so, se)
	}
}

// A run on read-only media is evaluated (without its lock, with a note).
func TestEvalRunOnReadOnlyMedia(t *testing.T) {
	dir := sineRun(t)
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o755)
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		ro = dir
	} else {
		if out, err := exec.Command("mount", "--bind", dir, ro).CombinedOutput(); err != nil {
			t.Skipf("root without a way to make a read-only folder (mount --bind: %v: %s)", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", ro).Run() })
		if out, err := exec.Command("mount", "-o", "remount,ro,bind", ro).CombinedOutput(); err != nil {
			t.Skipf("root without a way to make a read-only folder (remount ro: %v: %s)", err, out)
		}
	}
	so, se, code := mkbench(t, "eval", "--run", ro)
	if code != 0 || !strings.Contains(so, "matches summary.json") || !strings.Contains(se, "read without its lock") {
		t.Fatalf("eval --run on read-only media: exit %d, %q %q", code, so, se)
	}
}

// models export refuses a name the folder holds unless --force; mkbench
// models lists a folder with a damaged model, showing it as damaged.
func TestModelsExportForceAndDamagedListing(t *testing.T) {
	run, lib := sineRun(t), t.TempDir()
	if so, se, code := mkbench(t, "models", "export", run, "--name", "m", "--dir", lib); code != 0 {
		t.Fatalf("export (exit %d): %s%s", code, so, se)
	}
	info := testutil.ReadFile(t, filepath.Join(lib, "m", "model.json"))
	so, se, code := mkbench(t, "models", "export", run, "--name", "m", "--dir", lib)
	oneLineError(t, "export to an existing name", so, se, code, "add --force")
	if string(testutil.ReadFile(t, filepath.Join(lib, "m", "model.json"))) != string(info) {
		t.Fatal("a refused export changed the model")
	}
	if so, se, code := mkbench(t, "models", "export", run, "--name", "m", "--dir", lib, "--force"); code != 0 || !strings.Contains(se, "replaced") {
		t.Fatalf("export --force (exit %d): %s%s", code, so, se)
	}
	os.MkdirAll(filepath.Join(lib, "broken"), 0o755)
	os.WriteFile(filepath.Join(lib, "broken", "model.json"), []byte(`{"name":`), 0o644)
	so, se, code = mkbench(t, "models", "--dir", lib)
	if code != 0 || !strings.Contains(so, "m ") || !strings.Contains(so, "broken") || !strings.Contains(so, "damaged") ||
		!strings.Contains(se, "broken/model.json") || strings.Contains(se+so, "<nil>") {
		t.Fatalf("models --dir with a damaged model: exit %d\n%s%s", code, so, se)
	}
}

// Folders handed over name their runs and models as they like: mkbench
// runs and mkbench models --dir print those names with their control
// characters escaped, and no escape sequence of theirs reaches the
// terminal.
func TestListingsEscapeHostileNames(t *testing.T) {
	root := t.TempDir()
	evil := "evil\x1b]0;pwned\x07"
	if err := os.Rename(sineRun(t), filepath.Join(root, evil)); err != nil {
		t.Fatal(err)
	}
	so, se, code := mkbench(t, "runs", root)
	if code != 0 || strings.Contains(so+se, "\x1b") || strings.Contains(so+se, "\x07") || !strings.Contains(so, `evil\x1b]0;pwned\x07`) {
		t.Errorf("mkbench runs (exit %d): %q %q", code, so, se)
	}
	lib := t.TempDir()
	os.Mkdir(filepath.Join(lib, evil), 0o755)
	os.WriteFile(filepath.Join(lib, evil, "model.json"), []byte(`{"name":"evil\u001b]0;pwned\u0007","preset":"p\u001b[2J"}`), 0o644)
	so, se, _ = mkbench(t, "models", "--dir", lib)
	if strings.Contains(so+se, "\x1b") || strings.Contains(so+se, "\x07") || !strings.Contains(so, `evil\x1b]0;pwned\x07`) {
		t.Errorf("mkbench models --dir: %q %q", so, se)
	}
}
