package cluster

import "syscall"

// sysProcAttr kills a child if its parent dies without stopping it (a
// crash, a -timeout kill), so nothing is left holding ports.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
