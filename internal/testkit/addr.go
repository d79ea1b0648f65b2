package testkit

import (
	"net"
	"testing"
)

// ClosedAddr returns a 127.0.0.1 address nothing listens on (a port just
// released): a server that is down, or a free port to start one on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
