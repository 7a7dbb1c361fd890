package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mkbench/mkbench/experiments/export"
	"github.com/mkbench/mkbench/internal/tbevents"
	"github.com/mkbench/mkbench/internal/testutil"
)

// runEventFiles reads the event files of run dir: the scalar events as
// "step tag=value …" lines and the ω histograms by step.
func runEventFiles(t *testing.T, dir string) (files []string, scalars []string, omega map[int64][]tbevents.Value) {
	t.Helper()
	files, err := tbevents.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	omega = map[int64][]tbevents.Value{}
	for _, f := range files {
		evs, err := tbevents.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			switch {
			case len(e.Values) > 0 && e.Values[0].Histo != nil:
				omega[e.Step] = e.Values
			case len(e.Values) > 0:
				line := strconv.FormatInt(e.Step, 10)
				for _, v := range e.Values {
					line += fmt.Sprintf(" %s=%v", v.Tag, v.Simple)
				}
				scalars = append(scalars, line)
			}
		}
	}
	return files, scalars, omega
}

func removeEventFiles(t *testing.T, dir string) {
	t.Helper()
	files, _ := tbevents.Files(dir)
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// oneLineError checks a failed command: exit 1, nothing on stdout, one
// line on stderr containing want.
func oneLineError(t *testing.T, what, so, se string, code int, want string) {
	t.Helper()
	if code != 1 || so != "" || !strings.Contains(se, want) || strings.Count(se, "\n") != 1 {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want one line containing %q", what, code, so, se, want)
	}
}

// A run writes its event file as it trains; `export --tensorboard`
// rebuilds it for a run without one (a run made before event files) with
// the same scalars and, from the last checkpoint, the same final ω
// histograms; a run that has one is left alone unless --force.
func TestExportTensorBoard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if so, se, code := mkbench(t, "run", "--preset", "sine-5shot", "--variant", "metakernel", "--iters", "120", "--eval-tasks", "10",
		"--out", dir, "--quiet"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, so, se)
	}
	files, live, liveOmega := runEventFiles(t, dir)
	if len(files) != 1 || len(live) != 12 || len(liveOmega) != 2 || len(liveOmega[100]) != 5 || len(liveOmega[120]) != 5 {
		t.Fatalf("the run wrote %d event files, %d scalar events, ω histograms at %d steps", len(files), len(live), len(liveOmega))
	}
	removeEventFiles(t, dir)
	so, se, code := mkbench(t, "export", dir, "--tensorboard")
	files, got, gotOmega := runEventFiles(t, dir)
	if code != 0 || len(files) != 1 || so != dir+": 12 metrics rows, 0 validations, 1 ω histogram steps → "+filepath.Base(files[0])+"\n" || se != "" {
		t.Fatalf("export: exit %d, %d event files\n%s%s", code, len(files), so, se)
	}
	if len(files) != 1 || !reflect.DeepEqual(got, live) {
		t.Errorf("exported scalars (%d files):\n%s\nwant the run's own:\n%s", len(files), strings.Join(got, "\n"), strings.Join(live, "\n"))
	}
	if len(gotOmega) != 1 || !reflect.DeepEqual(gotOmega[120], liveOmega[120]) {
		t.Errorf("exported ω histograms at %d steps; the last differs from the run's own: %v", len(gotOmega), gotOmega[120] == nil)
	}
	so, se, code = mkbench(t, "export", dir, "--tensorboard")
	if code != 0 || se != "" || so != dir+": already has event files ("+filepath.Base(files[0])+"): nothing to do (--force rewrites them)\n" {
		t.Errorf("export again (the run has its event file): exit %d\n%s%s", code, so, se)
	}
	if so, se, code := mkbench(t, "export", dir, "--tensorboard", "--force"); code != 0 || !strings.Contains(so, "replacing 1 event files") {
		t.Errorf("export --force: exit %d\n%s%s", code, so, se)
	}
	if files, got, _ := runEventFiles(t, dir); len(files) != 1 || !reflect.DeepEqual(got, live) {
		t.Errorf("after --force: %d event files", len(files))
	}
}

// tidyTable is the table export.WriteTidy writes of the runs of dir, in
// format: what export --format writes, byte for byte (the package's tests
// check the table against the logs).
func tidyTable(t *testing.T, dir, format string) string {
	t.Helper()
	list, err := export.Runs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := export.WriteTidy(&b, list, format, func(n string) { t.Errorf("note: %s", n) }); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A classification run with validation: its event file has the
// validation curve and ω histograms; the tidy table has every metric and
// validation; export --tensorboard without the data writes the scalars
// and says why the histograms are missing.
func TestExportValidatedRun(t *testing.T) {
	shapes := t.TempDir()
	writeShapes(t, shapes, 25, 6, false)
	dir := filepath.Join(t.TempDir(), "run")
	if so, se, code := mkbench(t, "run", "--preset", "folder-5w1s", "--variant", "vrf+cnf", "--data", shapes, "--iters", "4", "--image-size", "32",
		"--set", "conv_filters=4", "--set", "query=2", "--set", "eval_query=2", "--set", "log_every=2", "--val-every", "2", "--val-tasks", "2",
		"--eval-tasks", "2", "--out", dir, "--quiet"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, so, se)
	}
	_, live, omega := runEventFiles(t, dir)
	joined := strings.Join(live, "\n")
	if len(live) != 4 || !strings.Contains(joined, "2 val/accuracy=") || !strings.Contains(joined, " val/accuracy_ci95=") || !strings.Contains(joined, "4 val/accuracy=") || len(omega[4]) != 5 {
		t.Errorf("events: scalars\n%s\nω histograms at %d steps, %d at iteration 4", joined, len(omega), len(omega[4]))
	}

	so, se, code := mkbench(t, "export", dir, "--format", "csv")
	if code != 0 {
		t.Fatalf("export csv: exit %d\n%s", code, se)
	}
	if want := tidyTable(t, dir, "csv"); so != want || strings.Count(so, "\n") != 19 {
		t.Errorf("csv:\n%s\nwant\n%s", so, want)
	}
	out := filepath.Join(t.TempDir(), "m.json")
	if so, se, code := mkbench(t, "export", dir, "--format", "json", "--out", out); code != 0 || so != "1 runs → "+out+"\n" || se != "" {
		t.Fatalf("export json: exit %d\n%s%s", code, so, se)
	}
	if got, want := string(testutil.ReadFile(t, out)), tidyTable(t, dir, "json"); got != want {
		t.Errorf("json:\n%s\nwant\n%s", got, want)
	}

	// With the data: the histograms of the best and the last checkpoint,
	// the last as the run drew it.
	if so, se, code := mkbench(t, "export", dir, "--tensorboard", "--force"); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, so, se)
	}
	if _, got, exported := runEventFiles(t, dir); !reflect.DeepEqual(got, live) || !reflect.DeepEqual(exported[4], omega[4]) {
		t.Errorf("exported scalars:\n%s\nwant\n%s\nor the ω histograms of iteration 4 differ", strings.Join(got, "\n"), joined)
	}

	// Without the data: the scalars, and a note.
	removeEventFiles(t, dir)
	if err := os.RemoveAll(shapes); err != nil {
		t.Fatal(err)
	}
	so, se, code = mkbench(t, "export", dir, "--tensorboard")
	if code != 0 || !strings.Contains(se, "ω histograms left out (scalars only)") || !strings.Contains(so, "2 metrics rows, 2 validations, 0 ω histogram steps") {
		t.Fatalf("export without the data: exit %d\n%s%s", code, so, se)
	}
	if _, got, omega := runEventFiles(t, dir); !reflect.DeepEqual(got, live) || len(omega) != 0 {
		t.Errorf("exported scalars:\n%s\nwant\n%s", strings.Join(got, "\n"), joined)
	}
}

// A sweep exports as one table, its runs named by their directories; its
// units already have event files, which export --tensorboard keeps.
func TestExportSweep(t *testing.T) {
	file := writeSweepFile(t, "presets: [sine-5shot]\nvariants: [rbf, vrf]\nseeds: [1]\niters: 20\neval_tasks: 5\n")
	dir := filepath.Join(t.TempDir(), "sw")
	if so, se, code := mkbench(t, "sweep", "run", file, "--out", dir, "--jobs", "2"); code != 0 {
		t.Fatalf("sweep run: exit %d\n%s%s", code, so, se)
	}
	so, se, code := mkbench(t, "export", dir, "--format", "csv")
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, se)
	}
	if want := tidyTable(t, dir, "csv"); so != want || strings.Count(so, "\n") != 29 || strings.Count(so, "units/sine-5shot-rbf-s1,") != 14 {
		t.Errorf("sweep table:\n%s\nwant\n%s", so, want)
	}
	so, se, code = mkbench(t, "export", dir, "--tensorboard")
	if code != 0 || se != "" || strings.Count(so, "already has event files") != 2 || strings.Count(so, "nothing to do") != 2 {
		t.Errorf("export --tensorboard of a sweep whose units have event files: exit %d\n%s%s", code, so, se)
	}
}

// Every bad use of export is one line naming the problem and the fix.
func TestExportBadInput(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export"}, "name the directory first: mkbench export DIR --tensorboard"},
		{[]string{"export", "--format", "csv"}, "name the directory first"},
		{[]string{"export", filepath.Join(empty, "nope"), "--format", "csv"}, "is not a directory; give a run, sweep or experiment directory"},
		{[]string{"export", empty, "--format", "csv"}, "holds no run (no config.json or checkpoint.gob in it or below it)"},
		{[]string{"export", empty, "--format", "xml"}, `--format "xml": want csv or json`},
		{[]string{"export", empty}, "say what to write: --tensorboard"},
		{[]string{"export", empty, "--tensorboard", "--format", "csv"}, "give --tensorboard or --format, not both"},
		{[]string{"export", empty, "--tensorboard", "--out", "t.csv"}, "--out goes with --format"},
		{[]string{"export", empty, "--format", "csv", "--force"}, "--force goes with --tensorboard or --out"},
		{[]string{"export", empty, "--format", "csv", "--data", empty}, "--data goes with --tensorboard"},
		{[]string{"export", empty, "--csv"}, "unknown flag --csv (mkbench help export)"},
	} {
		so, se, code := mkbench(t, c.args...)
		oneLineError(t, strings.Join(c.args, " "), so, se, code, c.want)
	}
	if so, _, code := mkbench(t, "export", "--help"); code != 0 || !strings.Contains(so, "-tensorboard") {
		t.Errorf("export --help: exit %d, %q", code, so)
	}
}
