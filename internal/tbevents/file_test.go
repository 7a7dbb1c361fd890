package tbevents

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/mkbench/mkbench/internal/tfrecord"
)

func TestNewHistogram(t *testing.T) {
	cases := []struct {
		name   string
		xs     []float64
		n      int
		limits []float64
		counts []float64
	}{
		// Limits -1, 0, 1, 2 over [-2, 2]; a value on a limit counts below it.
		{"right-closed", []float64{-2, -1, -0.5, 0, 1, 1.5, 2}, 4, []float64{-1, 0, 1, 2}, []float64{2, 2, 1, 2}},
		{"one value", []float64{3, 3, 3}, 5, []float64{3}, []float64{3}},
		{"non-finite left out", []float64{0, math.NaN(), 1, math.Inf(1), math.Inf(-1)}, 2, []float64{0.5, 1}, []float64{1, 1}},
	}
	for _, tc := range cases {
		h := NewHistogram(tc.xs, tc.n)
		if !reflect.DeepEqual(h.BucketLimit, tc.limits) || !reflect.DeepEqual(h.Bucket, tc.counts) {
			t.Errorf("%s: limits %v counts %v, want %v %v", tc.name, h.BucketLimit, h.Bucket, tc.limits, tc.counts)
		}
	}
	if h := NewHistogram([]float64{math.NaN()}, 3); h != nil {
		t.Errorf("no finite value: %+v, want nil", h)
	}
	// Every value is counted once, whatever the rounding at the limits.
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = math.Sin(float64(i)) * 1e-3 * float64(i%7)
	}
	h := NewHistogram(xs, 30)
	var n float64
	for _, c := range h.Bucket {
		n += c
	}
	if n != 1000 || h.Num != 1000 || h.BucketLimit[29] != h.Max {
		t.Errorf("counted %v of %v values; last limit %v, max %v", n, h.Num, h.BucketLimit[29], h.Max)
	}
}

// Two files started in the same second by one process get distinct
// names; Files lists them in name order, leaving other files out.
func TestCreateAndFiles(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1764000000, 0)
	a, err := Create(dir, now, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(dir, now, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	if a.Path() == b.Path() || b.Path() != a.Path()+".1" {
		t.Errorf("names %s and %s", a.Path(), b.Path())
	}
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "events.out.tfevents.1.h.tmp-123"), nil, 0o600)
	files, err := Files(dir)
	if err != nil || !reflect.DeepEqual(files, []string{a.Path(), b.Path()}) {
		t.Errorf("Files: %v, %v", files, err)
	}
	evs, err := Read(b.Path())
	if err != nil || len(evs) != 1 || evs[0].FileVersion != FileVersion || evs[0].WallTime != 1764000000 {
		t.Errorf("a new file holds %+v, %v", evs, err)
	}
}

// A writer that failed keeps failing, with the file named.
func TestWriterErrorIsSticky(t *testing.T) {
	w, err := Create(t.TempDir(), time.Now(), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close() // the disk goes away
	err1 := w.Write(Event{Step: 1, Values: []Value{Scalar("loss", 1)}})
	err2 := w.Write(Event{Step: 2, Values: []Value{Scalar("loss", 1)}})
	if err1 == nil || err2 != err1 {
		t.Errorf("errors %v, %v", err1, err2)
	}
}

// CutBack keeps the events up to the step and drops the rest, and a last
// record cut by a kill.
func TestCutBack(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, time.Unix(1764000000, 0), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for s := int64(10); s <= 50; s += 10 {
		if err := w.Write(Event{WallTime: float64(s), Step: s, Values: []Value{Scalar("loss", float64(s))}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	path := w.Path()
	if n, damaged, err := CutBack(path, 50, 0o600); n != 0 || damaged || err != nil {
		t.Fatalf("nothing to cut: %d %v %v", n, damaged, err)
	}
	// A kill mid-write leaves half a record.
	rec := tfrecord.AppendRecord(nil, (&Event{Step: 60, Values: []Value{Scalar("loss", 6)}}).Append(nil))
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(rec[:len(rec)-3])
	f.Close()
	if _, err := Read(path); !errors.Is(err, tfrecord.ErrTruncated) {
		t.Fatalf("reading the cut file: %v", err)
	}
	n, damaged, err := CutBack(path, 30, 0o600)
	if n != 2 || !damaged || err != nil {
		t.Fatalf("CutBack: dropped %d, damaged %v, %v", n, damaged, err)
	}
	evs, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, e := range evs {
		steps = append(steps, e.Step)
	}
	if !reflect.DeepEqual(steps, []int64{0, 10, 20, 30}) || evs[0].FileVersion != FileVersion {
		t.Errorf("steps after CutBack: %v", steps)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
}

// Decode refuses damage with an error, never a panic.
func FuzzDecode(f *testing.F) {
	for _, e := range sample() {
		f.Add(e.Append(nil))
	}
	f.Add([]byte{0x2a, 0x05, 0x0a, 0x03})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		again, err := Decode(e.Append(nil))
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", e, err)
		}
		if len(again.Values) != len(e.Values) || again.Step != e.Step {
			t.Fatalf("round trip: %+v then %+v", e, again)
		}
	})
}
