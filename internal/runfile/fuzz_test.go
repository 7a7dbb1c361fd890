package runfile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fuzzRow is a metrics.jsonl row as the engine writes it (engine.MetricsRow;
// runfile cannot import engine).
type fuzzRow struct {
	Iter     int     `json:"iter"`
	Loss     float64 `json:"loss"`
	Data     float64 `json:"data"`
	KL       float64 `json:"kl"`
	ELBO     float64 `json:"elbo"`
	Lambda   float64 `json:"lambda"`
	LR       float64 `json:"lr"`
	GradNorm float64 `json:"grad_norm"`
}

// fuzzDir is a fresh directory for the target's files, in memory where
// the system has /dev/shm: Truncate syncs every file it writes, which on a
// disk makes each execution take milliseconds (and the fuzzer's
// minimization of each new input minutes).
func fuzzDir(f *testing.F) string {
	if d, err := os.MkdirTemp("/dev/shm", "mkbench-fuzz-"); err == nil {
		f.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return f.TempDir()
}

// keptLines is what Truncate must keep of data: the lines that parse with
// an "iter" at most keep, in order, each ending in a newline.
func keptLines(data []byte, keep int) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		var row struct {
			Iter *int `json:"iter"`
		}
		if json.Unmarshal(line, &row) != nil || row.Iter == nil || *row.Iter > keep {
			continue
		}
		out = append(append(out, bytes.TrimRight(line, "\n")...), '\n')
	}
	return out
}

// FuzzMetricsLog writes arbitrary bytes as metrics.jsonl and runs the
// readers a resumed run uses: Read never fails on a present file and never
// returns more rows than lines; Truncate keeps exactly the parsing rows up
// to keepThrough, atomically, and is idempotent; OpenLog with keepThrough
// truncates the same way and then appends, and Read sees the appended row
// last.
func FuzzMetricsLog(f *testing.F) {
	rows := ""
	for i := 10; i <= 50; i += 10 {
		b, _ := json.Marshal(fuzzRow{Iter: i, Loss: 1.5 / float64(i), Data: 0.25, KL: 3e-5, ELBO: -1.25, Lambda: 0.1, LR: 1e-3, GradNorm: 2})
		rows += string(b) + "\n"
	}
	f.Add([]byte(rows), 30)
	f.Add([]byte(rows+`{"iter":60,"loss":0.0`), 60) // a row cut by a kill
	f.Add([]byte(rows), -1)
	f.Add([]byte("\n\r\n{\"iter\":null}\n{\"iter\":1e400}\n{\"iter\":\"3\"}\n{}\n[1]\n{\"iter\":2}{\"iter\":3}\n"), 5)
	f.Add([]byte(`{"iter":9223372036854775807}`+"\n"+`{"iter":-9223372036854775808}`), 0)
	dir := fuzzDir(f)
	f.Fuzz(func(t *testing.T, data []byte, keep int) {
		path := filepath.Join(dir, "metrics.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Read[fuzzRow](path)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if len(got) > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("Read returned %d rows from %d lines", len(got), bytes.Count(data, []byte("\n"))+1)
		}
		if _, err := Read[map[string]any](path); err != nil {
			t.Fatalf("Read as maps: %v", err)
		}
		// Every line is a row, blank, skipped (and told), or the last
		// one cut without its newline.
		rows, skipped, err := ReadRows[fuzzRow](path)
		lines := bytes.Split(data, []byte("\n"))
		blank := 0
		for _, l := range lines {
			if len(bytes.TrimSpace(l)) == 0 {
				blank++
			}
		}
		cut := 0
		if last := lines[len(lines)-1]; len(bytes.TrimSpace(last)) > 0 && json.Unmarshal(last, new(fuzzRow)) != nil {
			cut = 1
		}
		if err != nil || len(rows)+len(skipped)+blank+cut != len(lines) {
			t.Fatalf("ReadRows: %d rows, %d skipped, %d blank, %d cut of %d lines (%v)", len(rows), len(skipped), blank, cut, len(lines), err)
		}
		if (len(skipped) == 0) != (SkippedNote(path, skipped) == "") {
			t.Fatalf("SkippedNote of %v", skipped)
		}
		if err := Truncate(path, keep, Private); err != nil {
			t.Fatalf("Truncate: %v", err)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := keptLines(data, keep)
		if !bytes.Equal(after, want) && !(bytes.Equal(after, data) && bytes.Equal(want, data)) {
			t.Fatalf("Truncate(%d) left %q, want %q", keep, after, want)
		}
		if err := Truncate(path, keep, Private); err != nil {
			t.Fatalf("second Truncate: %v", err)
		}
		if again, _ := os.ReadFile(path); !bytes.Equal(again, after) {
			t.Fatalf("Truncate is not idempotent: %q then %q", after, again)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatalf("Truncate left %d files (temporary files?)", len(ents))
		}
		// OpenLog on the original bytes with the same keepThrough.
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		before, _ := Read[fuzzRow](path)
		l, err := OpenLog(path, keep, Private)
		if err != nil {
			t.Fatalf("OpenLog: %v", err)
		}
		next := fuzzRow{Iter: 7, Loss: 0.5}
		if keep >= 0 && keep < 1<<40 {
			next.Iter = keep + 1
		}
		if err := l.Append(next); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		rows, err = Read[fuzzRow](path)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 || rows[len(rows)-1] != next {
			t.Fatalf("after OpenLog(%d) and Append, Read gives %v", keep, rows)
		}
		if keep >= 0 {
			for _, r := range rows[:len(rows)-1] {
				if r.Iter > keep {
					t.Fatalf("OpenLog(%d) kept row %+v", keep, r)
				}
			}
		} else if len(rows) != len(before)+1 || !slices.Equal(rows[:len(before)], before) {
			t.Fatalf("OpenLog(-1) changed the rows: %d before, %d after", len(before), len(rows))
		}
	})
}
