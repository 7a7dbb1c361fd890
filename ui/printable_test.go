package ui

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// A run folder handed over by someone else can be named to drive the
// terminal (retitle it, clear it) and its failed.json can say anything:
// the runs screen shows both as escapes, and no byte of them reaches the
// terminal as a control sequence.
func TestRunsScreenShowsHostileNamesAsEscapes(t *testing.T) {
	root := t.TempDir()
	evil := "evil\x1b]0;pwned\x07\x1b[2J"
	tinyRun(t, filepath.Join(root, evil), presets.Overrides{"seed": 1})
	os.Remove(filepath.Join(root, evil, engine.FileSummary))
	if err := engine.WriteFailure(filepath.Join(root, evil), errorString("boom\x1b]52;c;aGk=\x07"), 3, true); err != nil {
		t.Fatal(err)
	}
	tm := teatest.NewTestModel(t, New(Options{Root: t.TempDir(), Seed: -1, Renderer: monoTheme().r, Runs: root}), teatest.WithInitialTermSize(120, 30))
	var raw bytes.Buffer
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(ansi.Strip(raw.String()), `evil\x1b]0;pwned\x07\x1b[2J`) || !strings.Contains(ansi.Strip(raw.String()), `boom\x1b]52;c;aGk=\x07`) {
		if time.Now().After(deadline) {
			t.Fatalf("the escaped name and error never appeared; the screen:\n%s", ansi.Strip(raw.String()))
		}
		b, _ := io.ReadAll(tm.Output())
		raw.Write(b)
		time.Sleep(50 * time.Millisecond)
	}
	for _, seq := range []string{"\x1b]0;pwned", "\x1b]52;", "\x07"} {
		if strings.Contains(raw.String(), seq) {
			t.Errorf("the terminal received %q from a file", seq)
		}
	}
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
}

type errorString string

func (e errorString) Error() string { return string(e) }
