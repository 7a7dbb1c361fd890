package sweep

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
)

// TestLongUnitNameIsCut: a grid value long enough to make a unit's name
// longer than a file system takes (a float written with 300 digits) is
// planned under a name that fits, kept apart from its neighbours by a
// hash; names that fit are as they were.
func TestLongUnitNameIsCut(t *testing.T) {
	long := "0.00" + strings.Repeat("1", 300)
	file := "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [1]\ngrid:\n  lr: [" + long + ", 0.002" + strings.Repeat("1", 300) + ", 0.001]\n"
	f, err := ParseFile("s.yaml", []byte(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	units := f.Units()
	seen := map[string]bool{}
	for _, u := range units {
		if len(u.Name) > MaxUnitName || len(filepath.Base(u.Dir)) > MaxUnitName {
			t.Errorf("unit %d is named with %d bytes, more than a file system takes", u.Index, len(u.Name))
		}
		if seen[strings.ToLower(u.Name)] {
			t.Errorf("two units named %s", u.Name)
		}
		seen[strings.ToLower(u.Name)] = true
	}
	if !strings.HasPrefix(units[0].Name, "sine-5shot-vrf-lr0.00111") || !strings.HasSuffix(units[0].Name, "-s1") {
		t.Errorf("a cut name keeps its readable start and seed: %s", units[0].Name)
	}
	if units[2].Name != "sine-5shot-vrf-lr0.001-s1" {
		t.Errorf("a name that fits changed: %s", units[2].Name)
	}
	// The unit directory can be made, and a worker's files written in it.
	dir := filepath.Join(t.TempDir(), units[0].Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestSameValueTwiceIsRefused: one value written two ways (0.001 and 1e-3,
// 64 and 064) would train one run twice under two names.
func TestSameValueTwiceIsRefused(t *testing.T) {
	for _, grid := range []string{"lr: [0.001, 1e-3]", "bases: [64, 064]", "lr: [0.5, 5E-1]"} {
		_, err := ParseFile("s.yaml", []byte("presets: [sine-5shot]\ngrid:\n  "+grid+"\n"), nil)
		if err == nil || !errors.Is(err, ErrSweepFile) || !strings.Contains(err.Error(), "s.yaml:3: grid.") || !strings.Contains(err.Error(), "again") {
			t.Errorf("%s: %v", grid, err)
		}
	}
}

// TestCollidingUnitDirsAreRefused: two different values that would name
// one unit directory (they differ only in characters a name replaces, or
// in case) are refused at plan time naming both.
func TestCollidingUnitDirsAreRefused(t *testing.T) {
	for _, c := range []struct{ grid, a, b string }{
		{`sources: ["a/b", "a+b"]`, "a/b", "a+b"},
		{`sources: [Aircraft, aircraft]`, "Aircraft", "aircraft"},
		{`lr_schedule: ["cosine", "COSINE"]`, "cosine", "COSINE"},
	} {
		_, err := ParseFile("s.yaml", []byte("presets: [sine-5shot]\ngrid:\n  "+c.grid+"\n"), nil)
		if err == nil || !errors.Is(err, ErrSweepFile) || !strings.Contains(err.Error(), `"`+c.a+`"`) || !strings.Contains(err.Error(), `"`+c.b+`"`) ||
			!strings.Contains(err.Error(), "unit directory") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", c.grid, err)
		}
	}
}

// TestCreateRefusesTooLongPath: a sweep directory so deep that its units'
// files would pass the longest path the system takes is refused when the
// sweep is created, not unit by unit at run time.
func TestCreateRefusesTooLongPath(t *testing.T) {
	f, err := ParseFile("t.yaml", []byte(smallSweep), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for len(dir) < 4050 {
		dir = filepath.Join(dir, strings.Repeat("d", 200))
	}
	dir = dir[:4050]
	err = Create(dir, Manifest{File: f, Units: f.Units(), Engine: "local"}, nil)
	if err == nil || !strings.Contains(err.Error(), "too long") || !strings.Contains(err.Error(), "--out") {
		t.Fatalf("error %v", err)
	}
}

// TestLoadRefusesHostileManifest: a sweep.json handed over cannot point a
// unit at the sweep directory itself, above it, or at another unit's
// directory.
func TestLoadRefusesHostileManifest(t *testing.T) {
	dir, m := newSweep(t, "presets: [sine-5shot]\nvariants: [vrf]\nseeds: [1, 2]\n")
	for _, c := range []struct{ dir0, dir1, want string }{
		{".", m.Units[1].Dir, "is malformed"},
		{"units/../..", m.Units[1].Dir, "is malformed"},
		{"units", m.Units[1].Dir, "is malformed"},
		{"units/a/b", m.Units[1].Dir, "is malformed"},
		{"/etc", m.Units[1].Dir, "is malformed"},
		{"units/x", "units/X", "share the directory"},
	} {
		bad := m
		bad.Units = append([]Unit(nil), m.Units...)
		bad.Units[0].Dir, bad.Units[1].Dir = c.dir0, c.dir1
		bad.Units[0].Name, bad.Units[1].Name = filepath.Base(c.dir0), filepath.Base(c.dir1)
		if err := runfile.WriteJSON(filepath.Join(dir, FileManifest), bad, runfile.Shared); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("units in %q and %q: %v", c.dir0, c.dir1, err)
		}
	}
	// Nor write lines of its own into the job script bash runs, nor
	// escape sequences onto a terminal.
	for _, change := range []func(*Manifest){
		func(b *Manifest) { b.File.Slurm.Partition = "main\nrm -rf ~" },
		func(b *Manifest) { b.File.Slurm.Extra = []string{"--output=/home/u/.bashrc"} },
		func(b *Manifest) { b.File.Slurm.Time = "1\n#SBATCH --export=LD_PRELOAD=/x.so" },
		func(b *Manifest) { b.Units[0].Grid = []string{"sources=\x1b]0;pwned\x07"} },
		func(b *Manifest) { b.Units[0].Name = "other" },
	} {
		bad := m
		bad.Units = append([]Unit(nil), m.Units...)
		change(&bad)
		if err := runfile.WriteJSON(filepath.Join(dir, FileManifest), bad, runfile.Shared); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "is damaged") {
			t.Errorf("%+v: %v", bad.File.Slurm, err)
		}
		if _, err := WriteScript(bad, dir, []int{0}); err == nil && bad.Units[0].Name != "other" && len(bad.Units[0].Grid) == 0 {
			t.Errorf("a script was written for %+v", bad.File.Slurm)
		}
	}
}

// TestLinkedFoldersAreRefused: a sweep directory handed over whose units/
// or logs/ is a link to a folder of the user's has nothing written there.
func TestLinkedFoldersAreRefused(t *testing.T) {
	dir, _ := newSweep(t, smallSweep)
	victim := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(dir, DirUnits)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, DirLogs)); err != nil {
		t.Fatal(err)
	}
	if err := (&Worker{Dir: dir}).Work(context.Background(), 0); !errors.Is(err, runfile.ErrSymlink) {
		t.Errorf("worker: %v", err)
	}
	if _, err := (&Local{Dir: dir, Binary: os.Args[0]}).Run(context.Background(), []int{0}); !errors.Is(err, runfile.ErrSymlink) {
		t.Errorf("local engine: %v", err)
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 0 {
		t.Errorf("%d files written beyond the link", len(entries))
	}
}

// A data folder or binary whose path is not UTF-8 (legal on Linux) reads
// back from sweep.json as it was given: JSON alone would hold U+FFFD for
// each such byte, and every unit would then look for another folder.
func TestManifestKeepsNonUTF8Paths(t *testing.T) {
	f, err := ParseFile("t.yaml", []byte("presets: [sine-5shot]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := Manifest{File: f, Units: f.Units(), Engine: "local", Data: "/data/caf\xe9", Binary: "/opt/mk\xffbench"}
	if err := Create(dir, m, nil); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil || back.Data != m.Data || back.Binary != m.Binary {
		t.Fatalf("read back data %q binary %q (%v)", back.Data, back.Binary, err)
	}
	if err := SetBinary(dir, "/usr/bin/mk\xfe"); err != nil {
		t.Fatal(err)
	}
	if back, err = Load(dir); err != nil || back.Binary != "/usr/bin/mk\xfe" || back.Data != m.Data {
		t.Fatalf("after SetBinary: data %q binary %q (%v)", back.Data, back.Binary, err)
	}
}

// The engine refuses to write a run into a sweep's directory by the name
// this package gives its manifest.
func TestEngineKnowsTheSweepManifest(t *testing.T) {
	if !slices.Contains(engine.GroupFiles, FileManifest) {
		t.Fatalf("engine.GroupFiles %v lacks %s", engine.GroupFiles, FileManifest)
	}
}
