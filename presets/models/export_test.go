package models

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
)

// runOf materializes shipped model from as a run directory to export.
func runOf(t *testing.T, from string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), from)
	if _, err := Shipped().Materialize(from, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tested is an evaluation that records mean without evaluating.
func tested(mean float64) func(*engine.Checkpoint) (engine.EvalResult, error) {
	return func(*engine.Checkpoint) (engine.EvalResult, error) {
		return engine.EvalResult{Metric: "accuracy", Mean: mean, Tasks: 1}, nil
	}
}

// An existing model is replaced only with force, and then whole: the new
// folder is in place, the old one's files gone, and a file of the user's
// in it kept aside and named.
func TestExportRefusesAnExistingName(t *testing.T) {
	run := runOf(t, "omniglot-5w1s")
	lib := t.TempDir()
	if _, _, err := Export(run, lib, "m", false, nil, nil, tested(0.5)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(lib, "m", FileInfo))
	_, _, err := Export(run, lib, "m", false, nil, nil, tested(0.6))
	var ex *ExistsError
	if !errors.As(err, &ex) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("export to an existing name: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(lib, "m", FileInfo)); string(after) != string(before) {
		t.Fatal("a refused export changed the model")
	}
	os.WriteFile(filepath.Join(lib, "m", "README.txt"), []byte("mine"), 0o644)
	_, note, err := Export(run, lib, "m", true, nil, nil, tested(0.7))
	if err != nil {
		t.Fatal(err)
	}
	_, info, err := Dir(lib).Open("m")
	if err != nil || info.Test.Mean != 0.7 {
		t.Fatalf("the replaced model: %+v, %v", info.Test, err)
	}
	kept, _ := filepath.Glob(filepath.Join(lib, ".m.replaced-*", "README.txt"))
	if len(kept) != 1 || !strings.Contains(note, "README.txt") {
		t.Fatalf("the user's file in the replaced model: %v, note %q", kept, note)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(kept[0]), FileModel)); err == nil {
		t.Error("the replaced model's own files were kept")
	}
	if list, err := Dir(lib).List(); err != nil || len(list) != 1 {
		t.Errorf("the library lists %v, %v: want the one model", list, err)
	}
}

// Exports to one name at once never mix their files: each model.json
// goes with its own model.mkbm. Without force exactly one of them
// succeeds; with force each succeeds and the last stands whole.
func TestConcurrentExportsToOneName(t *testing.T) {
	runs := []string{runOf(t, "omniglot-5w1s"), runOf(t, "omniglot-20w5s")}
	params := map[float64]int{}
	for i, r := range runs {
		ck, _, _, err := engine.LoadEvalCheckpoint(r)
		if err != nil {
			t.Fatal(err)
		}
		params[float64(i)] = paramCount(ck)
	}
	for _, force := range []bool{false, true} {
		for round := 0; round < 4; round++ {
			lib := t.TempDir()
			var wg sync.WaitGroup
			errs := make([]error, len(runs))
			for i, r := range runs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, errs[i] = Export(r, lib, "m", force, nil, nil, tested(float64(i)))
				}()
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				if err == nil {
					ok++
				} else if ex := (*ExistsError)(nil); !errors.As(err, &ex) {
					t.Fatalf("force %v: %v", force, err)
				}
			}
			if force && ok != 2 || !force && ok != 1 {
				t.Fatalf("force %v: %d of 2 exports succeeded (%v)", force, ok, errs)
			}
			ck, info, err := Dir(lib).Open("m")
			if err != nil || paramCount(ck) != params[info.Test.Mean] {
				t.Fatalf("force %v: model.json of export %v beside another's model.mkbm (%v)", force, info.Test.Mean, err)
			}
			if entries, _ := os.ReadDir(lib); len(entries) != 1 { // m alone: no work folder or lock file left
				t.Errorf("left in the library: %v", entries)
			}
		}
	}
}

// One damaged model does not hide the others; each damaged one is named
// with its reason (never "<nil>"); hidden folders are no models.
func TestListShowsTheRestOfADamagedLibrary(t *testing.T) {
	lib := libraryOf(t, "good", "omniglot-5w1s")
	dir := lib.where
	for name, info := range map[string]string{"bad": `{"name":`, "misnamed": `{"name":"other"}`, ".m.tmp-1": `{"name":".m.tmp-1"}`} {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, FileInfo), []byte(info), 0o644)
	}
	list, err := lib.List()
	var de *DamagedError
	if len(list) != 1 || list[0].Name != "good" || !errors.As(err, &de) || len(de.Damaged) != 2 {
		t.Fatalf("list %v, %v", list, err)
	}
	for _, d := range de.Damaged {
		if msg := d.Err.Error(); strings.Contains(msg, "<nil>") || !strings.Contains(msg, d.Name+"/"+FileInfo) {
			t.Errorf("%s: %q", d.Name, msg)
		}
	}
	if !strings.Contains(fmt.Sprint(de.Damaged[0].Err, de.Damaged[1].Err), `names the model "other"`) {
		t.Errorf("the misnamed model's reason: %v", de.Damaged)
	}
}

// A model.mkbm larger than any export writes (a sparse 3 GB file here) is
// refused by its size, not read.
func TestOpenRefusesAnOversizedModel(t *testing.T) {
	lib := libraryOf(t, "big", "omniglot-5w1s")
	if err := os.Truncate(filepath.Join(lib.where, "big", FileModel), 3<<30); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lib.Open("big"); !errors.Is(err, runfile.ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
	if _, err := lib.Materialize("big", filepath.Join(t.TempDir(), "big")); !errors.Is(err, runfile.ErrTooLarge) {
		t.Fatalf("materialize: want ErrTooLarge, got %v", err)
	}
}
