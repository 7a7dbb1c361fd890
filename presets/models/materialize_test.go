package models

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mkbench/mkbench/engine"
)

// libraryOf writes a folder library holding one model called name, its
// files those of shipped model from (model.json renamed), and returns it.
func libraryOf(t *testing.T, name, from string) Library {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ship := Shipped()
	for _, f := range []string{FileInfo, FileModel, "metrics.jsonl", "val.jsonl"} {
		b, err := fs.ReadFile(ship.fsys, path.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == FileInfo {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			m["name"] = name
			b, _ = json.Marshal(m)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Dir(filepath.Dir(dir))
}

// A folder holding the model is kept; one holding another model of the
// name (a newer mkbench ships it retrained) is moved aside whole, its
// every file kept, and the model asked for written in its place; a
// second replacement in the same second takes the next free name; a
// non-empty folder holding no model is refused and left as it was.
func TestMaterializeReplacesAnEarlierModel(t *testing.T) {
	const name = "omniglot-20w1s"
	older, newer := libraryOf(t, name, "omniglot-20w5s"), libraryOf(t, name, name)
	dir := RunDir(t.TempDir(), name)
	mark := filepath.Join(dir, FileModel)
	model := func(l Library) []byte {
		b, err := fs.ReadFile(l.fsys, path.Join(name, FileModel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	if aside, err := older.Materialize(name, dir); err != nil || aside != "" {
		t.Fatalf("into an empty folder: aside %q, %v", aside, err)
	}
	user := filepath.Join(dir, "notes.txt") // anything the user put there
	os.WriteFile(user, []byte("mine"), 0o644)
	then := time.Date(2026, 11, 27, 14, 36, 0, 0, time.UTC)
	os.Chtimes(mark, then, then)
	if aside, err := older.Materialize(name, dir); err != nil || aside != "" {
		t.Fatalf("the same model again: aside %q, %v", aside, err)
	}

	aside, err := newer.Materialize(name, dir)
	if want := dir + ".replaced-20261127T143600Z"; err != nil || aside != want {
		t.Fatalf("another model: aside %q (want %q), %v", aside, want, err)
	}
	if b, _ := os.ReadFile(filepath.Join(aside, FileModel)); !bytes.Equal(b, model(older)) {
		t.Error("the earlier model was not kept in the folder it was moved to")
	}
	if b, _ := os.ReadFile(filepath.Join(aside, "notes.txt")); string(b) != "mine" {
		t.Error("the user's file was not kept with the earlier model")
	}
	if b, _ := os.ReadFile(mark); !bytes.Equal(b, model(newer)) {
		t.Error("the model asked for was not written")
	}
	sum, err := engine.ReadSummary(dir)
	if info, _ := newer.info(name); err != nil || sum.Eval == nil || sum.Eval.Mean != info.Test.Mean || sum.Iters != info.Iters {
		t.Errorf("summary %+v, %v: not the new model's", sum, err)
	}

	os.Chtimes(mark, then, then)
	again, err := older.Materialize(name, dir)
	if want := dir + ".replaced-20261127T143600Z-2"; err != nil || again != want {
		t.Fatalf("a second replacement at the same time: aside %q (want %q), %v", again, want, err)
	}
	if b, _ := os.ReadFile(filepath.Join(aside, FileModel)); !bytes.Equal(b, model(older)) {
		t.Error("the second replacement touched the first folder moved aside")
	}

	other := filepath.Join(t.TempDir(), "x")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "run.log"), []byte("a run"), 0o644)
	if _, err := newer.Materialize(name, other); err == nil || !strings.Contains(err.Error(), "holds no model") {
		t.Errorf("a folder holding no model: %v", err)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 1 {
		t.Errorf("the refused folder was changed: %d entries", len(entries))
	}
}

// A model of a run that did not validate (Info.Last) materializes as that
// run's directory would read: evaluated on its last parameters, with no
// best iteration.
func TestMaterializeLastParameters(t *testing.T) {
	lib := libraryOf(t, "tv", "omniglot-5w1s")
	infoPath := filepath.Join(lib.where, "tv", FileInfo)
	b, err := os.ReadFile(infoPath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["last"] = true
	b, _ = json.Marshal(m)
	if err := os.WriteFile(infoPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := lib.Materialize("tv", dir); err != nil {
		t.Fatal(err)
	}
	sum, err := engine.ReadSummary(dir)
	if err != nil || sum == nil {
		t.Fatalf("summary: %v", err)
	}
	if sum.EvalCheckpoint != "last" || sum.BestIter != 0 {
		t.Errorf("materialized summary: eval_checkpoint %q, best_iter %d; want last, 0", sum.EvalCheckpoint, sum.BestIter)
	}
}
