package ui

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
)

// Quitting leaves nothing of the workbench: the last frame bubbletea
// flushes, into the alternate screen just before leaving it, is empty.
// A full frame there, with the cursor on its last line, is what tmux
// copied back onto the normal screen after the window had grown (16
// lines of dashboard above the summary).
func TestQuitLeavesNothing(t *testing.T) {
	tm, _ := startDashboard(t, Options{}, 100, 30)
	var raw bytes.Buffer
	scr := &termScreen{t: t, out: io.TeeReader(tm.Output(), &raw)}
	scr.waitFor(`MetaKernel|metakernel`)
	tm.Send(tea.WindowSizeMsg{Width: 160, Height: 48})
	scr.waitFor(`MetaKernel\s+running\s+\d+/`) // the grid, with its table
	tm.Send(keys("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(60*time.Second))
	if v := tm.FinalModel(t).View(); v != "" {
		t.Fatalf("the final frame is not empty:\n%s", ansi.Strip(v))
	}
	scr.pull()
	// The renderer starts each frame by moving the cursor up to the top
	// of the previous one; what follows the last such move is the last
	// frame.
	out := raw.String()
	moves := regexp.MustCompile(`\x1b\[\d+A`).FindAllStringIndex(out, -1)
	if len(moves) == 0 {
		t.Fatal("no frame was redrawn")
	}
	if last := ansi.Strip(out[moves[len(moves)-1][1]:]); strings.TrimSpace(last) != "" {
		t.Fatalf("the last frame drawn before leaving the screen is not blank:\n%s", last)
	}
}
