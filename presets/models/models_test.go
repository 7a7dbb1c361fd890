package models

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The shipped library lists without error; a folder lists only
// its folders holding a model.json; a damaged or misnamed model.json and
// a missing model are errors naming them.
func TestLibraryList(t *testing.T) {
	if _, err := Shipped().List(); err != nil {
		t.Fatalf("shipped models: %v", err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "half"), 0o755) // an export cut short: no model.json
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", FileInfo), []byte(`{"name":"a","preset":"p"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	list, err := Dir(dir).List()
	if err != nil || len(list) != 1 || list[0].Name != "a" {
		t.Fatalf("list %+v, %v", list, err)
	}
	if _, _, err := Dir(dir).Open("a"); err == nil || !strings.Contains(err.Error(), "model.mkbm") {
		t.Errorf("a model without its file: %v", err)
	}
	if _, _, err := Dir(dir).Open("zz"); !errors.Is(err, ErrNoModel) {
		t.Errorf("a missing model: %v", err)
	}
	// A path given as a name is refused as one, in both libraries (the
	// file systems' own "invalid argument" said nothing of the cause).
	for _, name := range []string{"../a", "/etc", ".", "..", "a/b", `a\b`, ".a", ""} {
		for _, lib := range []Library{Dir(dir), Shipped()} {
			if _, _, err := lib.Open(name); err == nil || !strings.Contains(err.Error(), "is not a model name") {
				t.Errorf("Open(%q) in %s: %v", name, lib.where, err)
			}
		}
	}
	os.WriteFile(filepath.Join(dir, "a", FileInfo), []byte(`{"name":"b"}`), 0o644)
	if _, err := Dir(dir).List(); err == nil || !strings.Contains(err.Error(), "a/model.json") {
		t.Errorf("a misnamed model.json: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "a", FileInfo), []byte(`{"name":`), 0o644)
	if _, err := Dir(dir).List(); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged model.json: %v", err)
	}
	if _, _, err := Export(dir, dir, "../up", false, nil, nil, nil); err == nil {
		t.Error("a name with a path was accepted")
	}
}
