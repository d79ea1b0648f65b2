//go:build !linux

package cluster

import "syscall"

// sysProcAttr: only Linux can tie a child's life to its parent's;
// elsewhere the parent's stop is all there is.
func sysProcAttr() *syscall.SysProcAttr { return nil }
