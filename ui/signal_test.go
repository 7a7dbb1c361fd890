//go:build linux

package ui

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mkbench/mkbench/engine"
	"github.com/mkbench/mkbench/presets"
)

// The workbench as the command line runs it (Run, on a terminal), in a
// child process on a pseudo-terminal, so that it can be hung up on and
// signalled for real. The child is this test binary again, told what to
// do by its environment; its exit status is Run's (1 on an error).
func init() {
	mode := os.Getenv("MKBENCH_UI_CHILD")
	if mode == "" {
		return
	}
	opts := Options{Preset: "sine-5shot", Iters: 1_000_000, Seed: -1, Root: os.Getenv("MKBENCH_UI_ROOT"), Overrides: tiny}
	if mode == "fail" {
		opts.NewSources = func(string, engine.Config) (presets.Sources, error) {
			return presets.Sources{}, errors.New("no such data set")
		}
	}
	if err := Run(opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mkbench:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminals here:", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 100, Row: 30}); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// child is the workbench running in a child process on a terminal.
type child struct {
	cmd    *exec.Cmd
	master *os.File
	root   string
	mu     sync.Mutex
	out    strings.Builder // what it drew, escapes and all
	exited chan struct{}
}

func startChild(t *testing.T, mode string) *child {
	t.Helper()
	c := &child{root: t.TempDir(), exited: make(chan struct{})}
	var slave *os.File
	c.master, slave = openPTY(t)
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), "MKBENCH_UI_CHILD="+mode, "MKBENCH_UI_ROOT="+c.root, "TERM=xterm-256color", "CI=")
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = slave, slave, slave
	// Its own session with the terminal as its controlling one: closing
	// the master hangs it up as closing a terminal window does.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() {
		// Answer as a terminal emulator does: lipgloss asks for the
		// background colour (and the cursor position after it) and waits
		// for the answer.
		answers := map[string]string{"\x1b]11;?": "\x1b]11;rgb:0000/0000/0000\x1b\\", "\x1b[6n": "\x1b[1;1R"}
		buf := make([]byte, 32<<10)
		for {
			n, err := c.master.Read(buf)
			c.mu.Lock()
			c.out.Write(buf[:n])
			c.mu.Unlock()
			for q, a := range answers {
				if strings.Contains(string(buf[:n]), q) {
					c.master.WriteString(a)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			c.cmd.Process.Kill()
			<-c.exited
		}
		c.master.Close()
	})
	return c
}

func (c *child) drawn() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// waitFor waits until the child drew want.
func (c *child) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(c.drawn(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("%q never appeared; the child drew:\n%s", want, tail(c.drawn()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExit waits for the child to end and returns its exit status.
func (c *child) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("the workbench did not exit; it drew:\n%s", tail(c.drawn()))
	}
	ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		t.Fatalf("the workbench was killed by %v, not ended by itself; it drew:\n%s", ws.Signal(), tail(c.drawn()))
	}
	return ws.ExitStatus()
}

func tail(s string) string { return s[max(0, len(s)-3000):] }

// running waits until the child's run has trained a little and returns
// its directory.
func (c *child) running(t *testing.T) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		dirs, _ := filepath.Glob(filepath.Join(c.root, "sine-5shot-metakernel-*"))
		if len(dirs) == 1 {
			if fi, err := os.Stat(filepath.Join(dirs[0], engine.FileMetrics)); err == nil && fi.Size() > 0 {
				return dirs[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run trained in %s; the child drew:\n%s", c.root, tail(c.drawn()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A hang-up (the terminal window closed, tmux kill-session, a dropped
// ssh) or SIGTERM stops the runs with a checkpoint, as q does, and the
// workbench exits by itself with status 0; it used to die of the SIGHUP
// with no checkpoint written.
func TestSignalCheckpointsRuns(t *testing.T) {
	for _, how := range []string{"hangup", "SIGHUP", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			c := startChild(t, "train")
			dir := c.running(t)
			switch how {
			case "hangup":
				c.master.Close() // the kernel sends SIGHUP to the terminal's session
			case "SIGHUP":
				c.cmd.Process.Signal(syscall.SIGHUP)
			case "SIGTERM":
				c.cmd.Process.Signal(syscall.SIGTERM)
			}
			if code := c.waitExit(t); code != 0 {
				t.Errorf("exit status %d; it drew:\n%s", code, tail(c.drawn()))
			}
			ck, err := engine.LoadCheckpoint(filepath.Join(dir, engine.FileCheckpoint))
			if err != nil {
				t.Fatalf("no checkpoint after %s: %v", how, err)
			}
			if ck.Iter == 0 {
				t.Errorf("checkpoint at iteration 0")
			}
			if how != "hangup" {
				c.waitFor(t, "stopped at iteration")
			}
		})
	}
}

// A run that failed makes the workbench's exit status 1 (and the reason
// is its last line), however the user quit.
func TestFailedRunExitStatus(t *testing.T) {
	c := startChild(t, "fail")
	c.waitFor(t, "failed")
	if _, err := io.WriteString(c.master, "q"); err != nil {
		t.Fatal(err)
	}
	if code := c.waitExit(t); code != 1 {
		t.Fatalf("exit status %d after a failed run, want 1; it drew:\n%s", code, tail(c.drawn()))
	}
	c.waitFor(t, "metakernel failed: no such data set")
	c.waitFor(t, "mkbench: metakernel failed")
}
