package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/testutil"
)

// snapshotDir is every regular file below dir (relative path → content).
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// validatedRun trains a run that validates (best.gob, val.jsonl) into a
// new directory and returns it with its options.
func validatedRun(t *testing.T) (string, Config, RunOptions) {
	t.Helper()
	cfg := classConfig("vrf", 0.9)
	cfg.Iters, cfg.ValEvery, cfg.ValTasks, cfg.LogEvery = 10, 5, 4, 5
	cfg.EvalTasks, cfg.EvalQuery, cfg.EvalSamples = 4, 3, 1
	src := blobs{way: 3, side: 7}
	dir := filepath.Join(t.TempDir(), "run")
	opts := RunOptions{Preset: "test", Dir: dir, Val: src, Test: src}
	if _, err := Run(context.Background(), cfg, src, opts, nil); err != nil {
		t.Fatal(err)
	}
	return dir, cfg, opts
}

// A run whose checkpoint.gob is lost after it validated is not started
// over: its record (best.gob, the logs, summary.json) is the only one, so
// the resume is refused, saying how to go on, and nothing changes. Asked
// to start over, the run moves its files aside, deleting none.
func TestResumeWithoutCheckpointKeepsTheRecord(t *testing.T) {
	dir, cfg, opts := validatedRun(t)
	for _, also := range []string{"", FileSummary} { // lost: the checkpoint, then the summary too
		os.Remove(filepath.Join(dir, FileCheckpoint))
		if also != "" {
			os.Remove(filepath.Join(dir, also))
		}
		before := snapshotDir(t, dir)
		o := opts
		o.Resume = true
		_, err := Run(context.Background(), Config{}, blobs{way: 3, side: 7}, o, nil)
		if err == nil || !strings.Contains(err.Error(), "mkbench eval --run "+dir) || !strings.Contains(err.Error(), "--start-over") {
			t.Fatalf("resume without checkpoint.gob (%s removed too): want a refusal naming eval --run and --start-over, got %v", also, err)
		}
		after := snapshotDir(t, dir)
		delete(after, runfile.FileLock)
		delete(before, runfile.FileLock)
		if len(before) != len(after) {
			t.Fatalf("the refused resume changed the directory: %v → %v", keys(before), keys(after))
		}
		for f, b := range before {
			if after[f] != b {
				t.Fatalf("the refused resume changed %s", f)
			}
		}
	}
	// Started over on request: the old files are kept aside, whole.
	before := snapshotDir(t, dir)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	o := opts
	o.Resume, o.StartOver = true, true
	res, err := Run(context.Background(), cfg, blobs{way: 3, side: 7}, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "stopped-*"))
	if len(aside) != 1 {
		t.Fatalf("want one stopped-* folder, got %v (notes %q)", aside, res.Notes)
	}
	for f, b := range before {
		if f == runfile.FileLock {
			continue
		}
		got, err := os.ReadFile(filepath.Join(aside[0], f))
		if err != nil || string(got) != b {
			t.Errorf("%s was not kept aside whole: %v", f, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("a file not mkbench's was moved or changed: %v", err)
	}
	if !strings.Contains(strings.Join(res.Notes, " "), aside[0]) {
		t.Errorf("the move is not noted: %q", res.Notes)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A run stopped before its first checkpoint is started over with its
// files moved aside into DIR/stopped-TIME, not deleted; what is not
// mkbench's stays in place.
func TestStartOverMovesFilesAside(t *testing.T) {
	cfg := tinyConfig("rff", 10)
	dir := filepath.Join(t.TempDir(), "run")
	stopAt(t, cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir}, 7)
	os.Remove(filepath.Join(dir, FileCheckpoint))
	metrics := testutil.ReadFile(t, filepath.Join(dir, FileMetrics))
	os.WriteFile(filepath.Join(dir, "metrics.jsonl.bak"), []byte("a user's copy"), 0o644)
	res, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir, Resume: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "stopped-*", FileMetrics))
	if len(aside) != 1 || !bytes.Equal(testutil.ReadFile(t, aside[0]), metrics) {
		t.Fatalf("the stopped run's metrics.jsonl was not kept aside: %v (notes %q)", aside, res.Notes)
	}
	if string(testutil.ReadFile(t, filepath.Join(dir, "metrics.jsonl.bak"))) != "a user's copy" {
		t.Fatal("a user's file was touched")
	}
}

// A kill during an atomic write leaves NAME.tmp-DIGITS beside the file:
// the next process that holds the run's lock removes exactly those of the
// run's own files, nothing else.
func TestInterruptedWriteLeftoversRemoved(t *testing.T) {
	cfg := tinyConfig("rff", 6)
	dir := filepath.Join(t.TempDir(), "run")
	stopAt(t, cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir}, 3)
	own := []string{FileCheckpoint + ".tmp-123456", FileSummary + ".tmp-9", FileMetrics + ".tmp-42"}
	keep := []string{"notes.txt.tmp-1", FileCheckpoint + ".tmp-12x", FileCheckpoint + ".tmp-", "x" + FileCheckpoint + ".tmp-5", FileCheckpoint + ".tmp-7.bak"}
	for _, f := range append(own, keep...) {
		os.WriteFile(filepath.Join(dir, f), []byte("partial"), 0o600)
	}
	os.Mkdir(filepath.Join(dir, FileBest+".tmp-77"), 0o755) // not a regular file
	keep = append(keep, FileBest+".tmp-77")
	res, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir, Resume: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range own {
		if fileExists(filepath.Join(dir, f)) {
			t.Errorf("%s was left", f)
		}
	}
	for _, f := range keep {
		if !fileExists(filepath.Join(dir, f)) {
			t.Errorf("%s, not provably an interrupted write of mkbench's, was removed", f)
		}
	}
	if !strings.Contains(strings.Join(res.Notes, " "), own[0]) {
		t.Errorf("the removal is not noted: %q", res.Notes)
	}
}

// A refused start leaves nothing behind that was not there: no lock file,
// no failed.json, no folder.
func TestRefusedStartLeavesNoTrace(t *testing.T) {
	dir, cfg, opts := validatedRun(t)
	os.Remove(filepath.Join(dir, runfile.FileLock)) // as a copy of the run would be
	before := snapshotDir(t, dir)
	o := opts
	_, err := Run(context.Background(), cfg, blobs{way: 3, side: 7}, o, nil)
	if err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if after := snapshotDir(t, dir); len(after) != len(before) {
		t.Fatalf("the refused start left %v (before: %v)", keys(after), keys(before))
	}

	// A start refused after the lock was taken: settings the engine refuses.
	bad := cfg
	bad.Iters = -1
	out := filepath.Join(t.TempDir(), "a", "b")
	if _, err := Run(context.Background(), bad, blobs{way: 3, side: 7}, RunOptions{Dir: out}, nil); err == nil {
		t.Fatal("bad settings were not refused")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(out))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused start left its folder: %v", err)
	}

	// Damaged logs refuse a resume: no failed.json for it.
	os.Remove(filepath.Join(dir, FileSummary))
	os.WriteFile(filepath.Join(dir, FileMetrics), []byte("garbage\n{\"iter\":5}\n"), 0o644)
	o.Resume = true
	if _, err := Run(context.Background(), Config{}, blobs{way: 3, side: 7}, o, nil); !errors.Is(err, ErrDamagedLog) {
		t.Fatalf("want ErrDamagedLog, got %v", err)
	}
	if fileExists(filepath.Join(dir, FileFailed)) || fileExists(filepath.Join(dir, runfile.FileLock)) {
		t.Fatal("a refused resume left failed.json or .lock")
	}
}

// A folder of the user's holding files named as a run's (config.json is a
// common name) is not a run stopped before its first checkpoint: a new
// run there is refused, and the files stay as they were.
func TestNewRunLeavesFilesNamedAsARunsAlone(t *testing.T) {
	_, cfg, _ := validatedRun(t)
	for _, files := range []map[string]string{
		{FileConfig: `{"mine":1}`, "notes.txt": "x"},
		{FileMetrics: "my own log\n"},
	} {
		dir := t.TempDir()
		for f, b := range files {
			os.WriteFile(filepath.Join(dir, f), []byte(b), 0o644)
		}
		before := snapshotDir(t, dir)
		_, err := Run(context.Background(), cfg, blobs{way: 3, side: 7}, RunOptions{Dir: dir}, nil)
		if err == nil || !strings.Contains(err.Error(), "not mkbench's to move") {
			t.Fatalf("%v: want a refusal, got %v", keys(before), err)
		}
		after := snapshotDir(t, dir)
		if len(after) != len(before) {
			t.Fatalf("the refused start changed %v into %v", keys(before), keys(after))
		}
		for f, b := range files {
			if got, _ := os.ReadFile(filepath.Join(dir, f)); string(got) != b {
				t.Errorf("%s changed to %q", f, got)
			}
		}
	}
}

// A data folder whose name is not UTF-8 is recorded so that it reads
// back as it was given.
func TestRunConfigKeepsNonUTF8Data(t *testing.T) {
	for _, data := range []string{"/data/caf\xe9/x\xff", "/data/plain", ""} {
		rc := RunConfig{Preset: "p", Source: "s", Data: data, Config: tinyConfig("rff", 2)}
		b, err := json.Marshal(rc)
		if err != nil {
			t.Fatal(err)
		}
		var back RunConfig
		if err := json.Unmarshal(b, &back); err != nil || back.Data != data || back.Config.Iters != 2 || back.Preset != "p" {
			t.Fatalf("%q: read back as %q (%v): %s", data, back.Data, err, b)
		}
		if strings.Contains(string(b), "data_bytes") != (data == "/data/caf\xe9/x\xff") {
			t.Errorf("%q: data_bytes written only when needed: %s", data, b)
		}
	}
	dir := filepath.Join(t.TempDir(), "run\xff")
	res, err := Run(context.Background(), tinyConfig("rff", 2), sineLike{}, RunOptions{Preset: "test", Dir: dir, Data: "/d\xfe"}, nil)
	if err != nil {
		t.Fatal(err, res.Notes)
	}
	if rc, err := ReadRunConfig(dir); err != nil || rc.Data != "/d\xfe" {
		t.Fatalf("config.json's data %q, %v", rc.Data, err)
	}
}

// A run on a read-only mount is read without its lock (nothing can write
// there), and a note says so; a writable one is locked as before.
func TestLockRunToReadOnReadOnlyMedia(t *testing.T) {
	dir, _, _ := validatedRun(t)
	os.Remove(filepath.Join(dir, runfile.FileLock))
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o755)
	readOnly(t, dir, ro)
	if _, err := LockRun(ro); err == nil {
		t.Fatal("LockRun on a read-only mount succeeded")
	}
	lock, note, err := LockRunToRead(ro)
	if err != nil || lock != nil || !strings.Contains(note, "read without its lock") {
		t.Fatalf("LockRunToRead on a read-only mount: %v, %v, %q", lock, err, note)
	}
	lock.Release()
	if _, _, _, err := LoadEvalCheckpoint(ro); err != nil {
		t.Fatal(err)
	}
	lock, note, err = LockRunToRead(dir)
	if err != nil || lock == nil || note != "" {
		t.Fatalf("LockRunToRead on a writable run: %v, %v, %q", lock, err, note)
	}
	lock.Release()
	if _, _, err := LockRunToRead(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) || fileExists(filepath.Join(dir, "none")) {
		t.Fatalf("LockRunToRead of a missing folder: %v", err)
	}
}

// readOnly makes a read-only view of dir at mnt: chmod where the tests do
// not run as root, a read-only bind mount where they do (root writes
// through permissions); skipped where neither can be had.
func readOnly(t *testing.T, dir, mnt string) {
	t.Helper()
	if os.Geteuid() != 0 {
		os.Remove(mnt)
		if err := os.Symlink(dir, mnt); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("mount", "--bind", dir, mnt).CombinedOutput(); err != nil {
		t.Skipf("running as root without a way to make a read-only folder (mount --bind: %v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	if out, err := exec.Command("mount", "-o", "remount,ro,bind", mnt).CombinedOutput(); err != nil {
		t.Skipf("running as root without a way to make a read-only folder (remount ro: %v: %s)", err, out)
	}
}

// Deleting a run removes mkbench's files of it, and the folder only when
// nothing else is left; a file of the user's stays, and is named.
func TestRemoveRunLeavesWhatIsNotMkbenchs(t *testing.T) {
	cfg := tinyConfig("rff", 6)
	dir := filepath.Join(t.TempDir(), "run")
	stopAt(t, cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir}, 3)
	os.Remove(filepath.Join(dir, FileCheckpoint))
	if _, err := Run(context.Background(), cfg, sineLike{}, RunOptions{Preset: "test", Dir: dir, Resume: true}, nil); err != nil {
		t.Fatal(err) // leaves a stopped-TIME folder of the engine's files
	}
	os.WriteFile(filepath.Join(dir, FileCheckpoint+".tmp-4"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "fits.json"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "notes.md"), []byte("mine"), 0o600)
	left, err := RemoveRun(dir, "fits.json")
	if err != nil || !slices.Equal(left, []string{"notes.md"}) {
		t.Fatalf("left %v, %v", left, err)
	}
	if got := keys(snapshotDir(t, dir)); len(got) != 2 { // notes.md and the lock file
		t.Fatalf("after RemoveRun: %v", got)
	}
	os.Remove(filepath.Join(dir, "notes.md"))
	if left, err := RemoveRun(dir); err != nil || len(left) != 0 {
		t.Fatalf("left %v, %v", left, err)
	}
}

// config.json as anyone may hand it over: when it reads, it writes back
// to the same data path, whatever its bytes (data_bytes when not UTF-8).
func FuzzRunConfigData(f *testing.F) {
	f.Add([]byte(`{"preset":"p","source":"s","data":"/d","config":{"iters":3}}`))
	f.Add([]byte(`{"data":"\ufffd","data_bytes":"L2T/","config":{}}`))
	f.Add([]byte(`{"data_bytes":"not base64"}`))
	f.Add([]byte(`{"data_bytes":null,"data":7}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var rc RunConfig
		if json.Unmarshal(b, &rc) != nil {
			return
		}
		out, err := json.Marshal(rc)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back RunConfig
		if err := json.Unmarshal(out, &back); err != nil || back.Data != rc.Data || back.Preset != rc.Preset {
			t.Fatalf("round trip: %q → %q (%v)", rc.Data, back.Data, err)
		}
	})
}
