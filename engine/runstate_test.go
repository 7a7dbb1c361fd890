package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mkbench/mkbench/internal/runfile"
)

// The run's files decide its state in order: summary.json, a held lock,
// failed.json; a damaged summary.json is an error beside the rest.
func TestReadRunState(t *testing.T) {
	dir := t.TempDir()
	if st := ReadRunState(dir); st.Summary != nil || st.Held || st.Failure != nil || st.SummaryErr != nil {
		t.Fatalf("an empty directory: %+v", st)
	}
	if err := WriteFailure(dir, errors.New("boom"), 7, true); err != nil {
		t.Fatal(err)
	}
	if st := ReadRunState(dir); st.Failure == nil || st.Failure.Error != "boom" || st.Failure.Iter != 7 {
		t.Fatalf("failed: %+v", st)
	}
	lock, err := runfile.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := ReadRunState(dir)
	lock.Release()
	if !st.Held || st.Owner.PID != os.Getpid() || st.Failure != nil {
		t.Fatalf("held: %+v", st)
	}
	if st := ReadRunState(dir); st.Held || st.Owner.PID != os.Getpid() {
		t.Fatalf("released: the last owner should stay known: %+v", st)
	}
	os.WriteFile(filepath.Join(dir, FileSummary), []byte(`{"iters":`), 0o644)
	if st := ReadRunState(dir); st.SummaryErr == nil || st.Failure == nil {
		t.Fatalf("a damaged summary.json: %+v", st)
	}
	os.WriteFile(filepath.Join(dir, FileSummary), []byte(`{"iters":9}`), 0o644)
	if st := ReadRunState(dir); st.Summary == nil || st.Summary.Iters != 9 || st.Failure != nil {
		t.Fatalf("finished: %+v", st)
	}
}
