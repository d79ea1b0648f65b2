//go:build !linux

package natstest

import "syscall"

// sysProcAttr: only Linux can tie the child's life to the parent's; elsewhere
// the t.Cleanup kill is all there is.
func sysProcAttr() *syscall.SysProcAttr { return nil }
