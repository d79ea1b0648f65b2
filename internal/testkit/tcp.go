package testkit

import (
	"net"
	"sync"
	"testing"
)

// ServeTCP serves every connection to a listener on 127.0.0.1 with serve,
// each on a goroutine of its own, and returns its address and a stop that
// closes the listener and every connection and waits for serve's calls to
// return. Stop runs at t's cleanup too (twice is harmless): a test's raw
// server, a hanging one or a hand-written HTTP one, leaves nothing behind.
func ServeTCP(t testing.TB, serve func(net.Conn)) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
		once  sync.Once
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { serve(c) })
		}
	})
	stop = func() {
		once.Do(func() {
			ln.Close()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}
