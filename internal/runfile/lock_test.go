package runfile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second Lock of a held directory fails at once naming the holder; after
// Release the directory can be taken again.
func TestLockIsExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	var e *InUseError
	if !errors.As(err, &e) || !errors.Is(err, ErrInUse) {
		t.Fatalf("second lock: want an InUseError, got %v", err)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf("%s is in use by pid %d on %s since ", dir, os.Getpid(), host)
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %q, want it to start %q", err, want)
	}
	if time.Since(e.Owner.Since) > time.Minute {
		t.Fatalf("since %v", e.Owner.Since)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Lock(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.Release()
	var none *DirLock
	if err := none.Release(); err != nil {
		t.Fatal(err)
	}
}

// A lock whose owner died (here: a child process killed with SIGKILL while
// holding it) is taken over.
func TestLockOfDeadOwnerIsTakenOver(t *testing.T) {
	if os.Getenv("RUNFILE_LOCK_CHILD") != "" {
		if _, err := Lock(os.Getenv("RUNFILE_LOCK_CHILD")); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		time.Sleep(time.Minute)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLockOfDeadOwnerIsTakenOver$")
	cmd.Env = append(os.Environ(), "RUNFILE_LOCK_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "locked") {
		cmd.Process.Kill()
		t.Fatalf("child said %q", buf[:n])
	}
	if _, err := Lock(dir); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		cmd.Process.Kill()
		t.Fatalf("while the child holds it: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Lock(dir)
	if err != nil {
		t.Fatalf("after the owner died: %v", err)
	}
	l.Release()
}
