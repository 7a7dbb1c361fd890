package export

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/internal/runfile"
	"github.com/mkbench/mkbench/internal/tbevents"
	"github.com/mkbench/mkbench/internal/testutil"
	"github.com/mkbench/mkbench/presets"
)

func TestMain(m *testing.M) { os.Exit(testutil.TempCache(m)) }

// sineRun trains a small sine-5shot run of variant into dir, which gets
// the run's own event file as every run does.
func sineRun(t *testing.T, dir, variant string, iters int) {
	t.Helper()
	p, cfg, err := presets.Spec{Preset: "sine-5shot", Variant: variant,
		Overrides: presets.Overrides{"iters": iters, "eval_tasks": 2}}.Config()
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := presets.NewSources(p.Source, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(context.Background(), cfg, srcs.Train, engine.RunOptions{Preset: p.Name, Dir: dir, Test: srcs.Test}, nil); err != nil {
		t.Fatal(err)
	}
}

// wantRows is the table of run dir, named rel, read from its logs: by
// iteration, the metrics before the validation.
func wantRows(t *testing.T, dir, rel string) []Row {
	t.Helper()
	metrics, err := runfile.Read[engine.MetricsRow](filepath.Join(dir, engine.FileMetrics))
	if err != nil || len(metrics) == 0 {
		t.Fatalf("%s: %d metrics rows, %v", dir, len(metrics), err)
	}
	vals, _ := runfile.Read[engine.ValRow](filepath.Join(dir, engine.FileVal))
	var out []Row
	for _, m := range metrics {
		for _, f := range []struct {
			n string
			v float64
		}{{"loss", m.Loss}, {"data", m.Data}, {"kl", m.KL}, {"elbo", m.ELBO}, {"lambda", m.Lambda}, {"lr", m.LR}, {"grad_norm", m.GradNorm}} {
			out = append(out, Row{rel, m.Iter, f.n, f.v})
		}
	}
	for _, v := range vals {
		out = append(out, Row{rel, v.Iter, "val_" + v.Metric, v.Mean}, Row{rel, v.Iter, "val_" + v.Metric + "_ci95", v.CI95})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Iter < out[j].Iter })
	return out
}

func readCSV(t *testing.T, text string) []Row {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(recs) == 0 || strings.Join(recs[0], ",") != "run,iter,metric,value" {
		t.Fatalf("csv (%v):\n%s", err, text)
	}
	var out []Row
	for _, r := range recs[1:] {
		iter, err1 := strconv.Atoi(r[1])
		v, err2 := strconv.ParseFloat(r[3], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("csv row %v", r)
		}
		out = append(out, Row{r[0], iter, r[2], v})
	}
	return out
}

// Runs finds a run itself as ".", the runs of a folder by their relative
// paths, and refuses a path that is no directory or holds no run with
// one line naming what to give.
func TestRunsOfADirectory(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "grid", "b")
	sineRun(t, a, "rbf", 4)
	sineRun(t, b, "vrf", 4)
	if got, err := Runs(a); err != nil || !reflect.DeepEqual(got, []Run{{a, "."}}) {
		t.Errorf("Runs(a run) = %v, %v", got, err)
	}
	got, err := Runs(root)
	if err != nil || !reflect.DeepEqual(got, []Run{{a, "a"}, {b, "grid/b"}}) {
		t.Errorf("Runs(a folder of runs) = %v, %v", got, err)
	}
	empty := t.TempDir()
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(empty, "nope"), "is not a directory; give a run, sweep or experiment directory"},
		{filepath.Join(a, engine.FileConfig), "is not a directory"},
		{empty, "holds no run (no config.json or checkpoint.gob in it or below it)"},
	} {
		if _, err := Runs(c.dir); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Runs(%s): %v; want one line containing %q", c.dir, err, c.want)
		}
	}
}

// WriteTidy writes every metric and validation of every run, CSV and
// JSON the same rows; a garbled row mid-log is left out and noted, a last
// row cut by a kill is left out silently.
func TestWriteTidy(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	sineRun(t, a, "rbf", 10)
	sineRun(t, b, "vrf", 10)
	list, err := Runs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := append(wantRows(t, a, "a"), wantRows(t, b, "b")...)
	var notes []string
	note := func(n string) { notes = append(notes, n) }
	var buf bytes.Buffer
	if err := WriteTidy(&buf, list, "csv", note); err != nil {
		t.Fatal(err)
	}
	if got := readCSV(t, buf.String()); !reflect.DeepEqual(got, want) || len(notes) != 0 {
		t.Errorf("csv:\n%v\nwant\n%v\nnotes %q", got, want, notes)
	}
	buf.Reset()
	if err := WriteTidy(&buf, list, "json", note); err != nil {
		t.Fatal(err)
	}
	var fromJSON []Row
	if err := json.Unmarshal(buf.Bytes(), &fromJSON); err != nil || !reflect.DeepEqual(fromJSON, want) {
		t.Errorf("json (%v):\n%s", err, buf.String())
	}
	if err := WriteTidy(&buf, list, "xml", note); err == nil {
		t.Error("WriteTidy took format xml")
	}

	path := filepath.Join(a, engine.FileMetrics)
	lines := strings.SplitAfter(string(testutil.ReadFile(t, path)), "\n")
	os.WriteFile(path, []byte(lines[0]+"{\"iter\": 7, garbage\n"+strings.Join(lines[1:], "")), 0o644)
	rows, err := Rows(list[0], note)
	if err != nil || len(rows) != len(wantRows(t, a, "a")) || len(notes) != 1 || !strings.Contains(notes[0], "1 damaged line left out") || !strings.Contains(notes[0], "line 2 ") {
		t.Errorf("a garbled row: %d rows, %v, notes %q", len(rows), err, notes)
	}
	notes = nil
	os.WriteFile(path, []byte(strings.Join(lines, "")+`{"iter": 12, "lo`), 0o644)
	if rows, err := Rows(list[0], note); err != nil || len(rows) != len(want)/2 || len(notes) != 0 {
		t.Errorf("a row cut by a kill: %d rows, %v, notes %q", len(rows), err, notes)
	}
}

// CheckOut never lets a table land on a run's own file, however the path
// reaches it, and replaces an existing file only with force.
func TestCheckOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	sineRun(t, dir, "rbf", 4)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	sum := filepath.Join(t.TempDir(), "sum")
	os.Symlink(filepath.Join(dir, engine.FileSummary), sum)
	for _, out := range []string{
		filepath.Join(dir, engine.FileCheckpoint),
		filepath.Join(link, engine.FileConfig),
		filepath.Join(dir, "nothing", "..", engine.FileMetrics),
		filepath.Join(dir, engine.FileCheckpoint+".tmp-12"),
		sum,
	} {
		for _, force := range []bool{false, true} {
			if err := CheckOut(out, force); err == nil || !strings.Contains(err.Error(), "never writes over") {
				t.Errorf("CheckOut(%s, force %v) = %v", out, force, err)
			}
		}
	}
	out := filepath.Join(t.TempDir(), "table.csv")
	if err := CheckOut(out, false); err != nil {
		t.Errorf("CheckOut(a new file) = %v", err)
	}
	os.WriteFile(out, []byte("mine"), 0o644)
	if err := CheckOut(out, false); err == nil || !strings.Contains(err.Error(), "add --force") {
		t.Errorf("CheckOut(an existing file) = %v", err)
	}
	if err := CheckOut(out, true); err != nil {
		t.Errorf("CheckOut(an existing file, force) = %v", err)
	}
	if err := CheckOut(filepath.Dir(out), true); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("CheckOut(a folder) = %v", err)
	}
}

// scalars are the scalar events of run dir's event files as "step
// tag=value …" lines, and the number of steps with ω histograms.
func scalars(t *testing.T, dir string) (files int, lines []string, omega int) {
	t.Helper()
	fs, err := tbevents.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		evs, err := tbevents.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			switch {
			case len(e.Values) > 0 && e.Values[0].Histo != nil:
				omega++
			case len(e.Values) > 0:
				line := strconv.FormatInt(e.Step, 10)
				for _, v := range e.Values {
					line += fmt.Sprintf(" %s=%v", v.Tag, v.Simple)
				}
				lines = append(lines, line)
			}
		}
	}
	return len(fs), lines, omega
}

// TensorBoard rebuilds the event file of a run that has none with the
// scalars the run wrote itself and its last ω histograms; a run that has
// one needs nothing, unless force replaces it.
func TestTensorBoard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	sineRun(t, dir, "metakernel", 40)
	n, live, _ := scalars(t, dir)
	if n != 1 || len(live) == 0 {
		t.Fatalf("the run wrote %d event files, %d scalar events", n, len(live))
	}
	res, err := TensorBoard(dir, false, "")
	if err != nil || !strings.Contains(res.Msg, "already has event files") || !strings.Contains(res.Msg, "nothing to do") || len(res.Notes) != 0 {
		t.Errorf("TensorBoard(a run with event files) = %+v, %v", res, err)
	}
	fs, _ := tbevents.Files(dir)
	for _, f := range fs {
		os.Remove(f)
	}
	res, err = TensorBoard(dir, false, "")
	want := fmt.Sprintf("%d metrics rows, 0 validations, 1 ω histogram steps → events.out.tfevents.", len(live))
	if err != nil || !strings.HasPrefix(res.Msg, want) || len(res.Notes) != 0 {
		t.Errorf("TensorBoard = %+v, %v; want %q", res, err, want)
	}
	if n, got, omega := scalars(t, dir); n != 1 || !reflect.DeepEqual(got, live) || omega != 1 {
		t.Errorf("exported %d files, %d ω steps, scalars\n%s\nwant\n%s", n, omega, strings.Join(got, "\n"), strings.Join(live, "\n"))
	}
	if res, err := TensorBoard(dir, true, ""); err != nil || !strings.HasSuffix(res.Msg, "(replacing 1 event files)") {
		t.Errorf("TensorBoard(force) = %+v, %v", res, err)
	}
	if n, got, _ := scalars(t, dir); n != 1 || !reflect.DeepEqual(got, live) {
		t.Errorf("after force: %d event files", n)
	}

	// A run that has no rows yet has nothing to export.
	bare := t.TempDir()
	os.WriteFile(filepath.Join(bare, engine.FileConfig), []byte("{}"), 0o644)
	if _, err := TensorBoard(bare, false, ""); err == nil || !strings.Contains(err.Error(), "nothing to export") {
		t.Errorf("TensorBoard(a run with no rows) = %v", err)
	}
}
