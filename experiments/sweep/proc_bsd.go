//go:build unix && !linux

package sweep

import "syscall"

// workerAttr puts a worker in its own process group, so a Ctrl-C at the
// terminal reaches it once, through the coordinator. Without Linux's
// parent-death signal, a worker learns of its coordinator's death by
// watching its parent (WithParent).
func workerAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
