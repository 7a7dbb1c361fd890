package sweep

import "syscall"

// workerAttr puts a worker in its own process group, so a Ctrl-C at the
// terminal reaches it once, through the coordinator, rather than twice;
// and has the kernel send it SIGTERM when the coordinator dies however it
// dies (kill -9 included), so it saves a checkpoint and ends rather than
// training on as an orphan no one reports. The signal comes when the
// thread that started the worker ends: Local.unit keeps that thread for
// the worker's life.
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
