package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// checkout makes a module root (main/, with go.mod) with a shared/ beside
// it, as a developer's checkout has, and runs the test from a package
// folder inside it; it returns the folder above main/.
func checkout(t *testing.T) string {
	t.Helper()
	top := t.TempDir()
	pkg := filepath.Join(top, "main", "pkg")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(top, "main", "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(pkg)
	t.Setenv("MKBENCH_DATA", "")
	t.Setenv("CI", "")
	return top
}

// put writes empty files at the slash-separated paths under dir.
func put(t *testing.T, dir string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		p = filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeTB records how Data ended a test instead of ending the real one.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// data runs Data on a fake test, as a test's goroutine would.
func data(t *testing.T, set string, extra ...string) (dir string, f *fakeTB) {
	f = &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		dir = Data(f, set, extra...)
	}()
	<-done
	return dir, f
}

// The data set is found where mkbench looks without --data: ./data of the
// checkout before ../shared/data, and only $MKBENCH_DATA when it is set;
// a folder lacking one of the files does not count.
func TestDataFindsTheSetWhereMkbenchLooks(t *testing.T) {
	top := checkout(t)
	shared := filepath.Join(top, "shared", "data", "omniglot")
	put(t, shared, "images_background.zip", "images_evaluation.zip")
	put(t, filepath.Join(top, "main", "data", "omniglot"), "images_background.zip") // half a copy
	if dir, f := data(t, "omniglot"); dir != shared || f.skipped != "" || f.failed != "" {
		t.Fatalf("with ../shared/data: %q, skip %q, fail %q", dir, f.skipped, f.failed)
	}
	local := filepath.Join(top, "main", "data", "omniglot")
	if err := os.Mkdir(filepath.Join(local, "images_evaluation"), 0o755); err != nil { // unpacked
		t.Fatal(err)
	}
	if dir, _ := data(t, "omniglot"); dir != local {
		t.Fatalf("with ./data/omniglot: %q", dir)
	}
	t.Setenv("MKBENCH_DATA", filepath.Join(top, "elsewhere"))
	_, f := data(t, "omniglot")
	if want := "$MKBENCH_DATA/omniglot (" + filepath.Join(top, "elsewhere", "omniglot") + ")"; !strings.Contains(f.skipped, want) || strings.Contains(f.skipped, "shared") {
		t.Fatalf("with MKBENCH_DATA set elsewhere: %q, want only %q", f.skipped, want)
	}
	put(t, filepath.Join(top, "elsewhere", "metadataset", "specs"), "ilsvrc_2012_dataset_spec.json")
	if dir, _ := data(t, "metadataset"); dir != filepath.Join(top, "elsewhere", "metadataset") {
		t.Fatalf("metadataset in MKBENCH_DATA: %q", dir)
	}
}

// Without the data a test skips with one line saying what it needs, where
// it looked and how to get it; with CI=true the same line fails it.
func TestDataSkipsOrFailsInCI(t *testing.T) {
	checkout(t)
	want := "needs the Omniglot zips in ./data/omniglot or ../shared/data/omniglot or $MKBENCH_DATA/omniglot (get them with: mkbench data get omniglot)"
	for _, ci := range []string{"", "false", "0"} {
		t.Setenv("CI", ci)
		if dir, f := data(t, "omniglot"); f.skipped != want || f.failed != "" || dir != "" {
			t.Fatalf("CI=%q: skip %q, fail %q; want the skip %q", ci, f.skipped, f.failed, want)
		}
	}
	for _, ci := range []string{"true", "1", "TRUE"} {
		t.Setenv("CI", ci)
		if _, f := data(t, "omniglot"); f.skipped != "" || !strings.HasPrefix(f.failed, want) || strings.Contains(f.failed, "\n") || !strings.Contains(f.failed, "CI=true") {
			t.Fatalf("CI=%q: skip %q, fail %q; want one failing line starting %q", ci, f.skipped, f.failed, want)
		}
	}
}

// Files a test needs beyond the set's own are looked for too, and named.
func TestDataExtraFiles(t *testing.T) {
	top := checkout(t)
	shared := filepath.Join(top, "shared", "data", "omniglot")
	put(t, shared, "images_background.zip", "images_evaluation.zip")
	_, f := data(t, "omniglot", "splits/vinyals/trainval.txt")
	if !strings.Contains(f.skipped, "needs the Omniglot zips and splits/vinyals/trainval.txt in ") {
		t.Fatalf("without the split file: %q", f.skipped)
	}
	put(t, shared, "splits/vinyals/trainval.txt")
	if dir, f := data(t, "omniglot", "splits/vinyals/trainval.txt"); dir != shared {
		t.Fatalf("with it: %q, %q", dir, f.skipped)
	}
	// A test that needs the zips, not an unpacked copy, names them so: the
	// unpacked folders do not count, and the line does not name the zips
	// twice.
	local := filepath.Join(top, "main", "data", "omniglot")
	put(t, local, "images_background/a.png", "images_evaluation/b.png")
	if dir, _ := data(t, "omniglot"); dir != local {
		t.Fatalf("an unpacked copy in ./data: %q", dir)
	}
	if dir, _ := data(t, "omniglot", "images_background.zip", "images_evaluation.zip"); dir != shared {
		t.Fatalf("the zips, with an unpacked copy in ./data: %q", dir)
	}
	os.RemoveAll(shared)
	if _, f := data(t, "omniglot", "images_background.zip"); !strings.HasPrefix(f.skipped, "needs the Omniglot zips in ") {
		t.Fatalf("the zips, with none: %q", f.skipped)
	}
}

// A name no table row has is the test's own mistake: it fails, CI or not.
func TestDataUnknownSetFails(t *testing.T) {
	checkout(t)
	if _, f := data(t, "omniglott"); f.skipped != "" || !strings.Contains(f.failed, `no data set "omniglott"`) {
		t.Fatalf("skip %q, fail %q", f.skipped, f.failed)
	}
}
