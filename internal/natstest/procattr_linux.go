package natstest

import "syscall"

// sysProcAttr kills nats-server if the test binary dies without running its
// cleanups (a panic in another goroutine, a -timeout kill), so no server is
// left holding ports.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
