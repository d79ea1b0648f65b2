package gethtest

import "syscall"

// sysProcAttr kills geth if the test binary dies without running its
// cleanups (a panic in another goroutine, a -timeout kill), so no node is
// left holding ports.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
