package pgtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Bounds of Proxy.
const (
	// proxyDialTimeout bounds the dial to the server for one connection.
	proxyDialTimeout = 5 * time.Second
	// relistenTimeout bounds Start's wait for the port to be released.
	relistenTimeout = 10 * time.Second
	relistenPoll    = 50 * time.Millisecond
)

// Proxy relays a loopback port to the server of a database: a Postgres
// that can go away. Stop closes the port and cuts every connection, an
// outage as a client sees it; Start listens on the same port again.
type Proxy struct {
	t      testing.TB
	url    string // the database's URL through the proxy
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener // nil while stopped
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to the server of database URL u (from New or
// Empty); it is stopped when the test ends.
func NewProxy(t testing.TB, u string) *Proxy {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("pgtest: proxy: database URL: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{t: t, addr: ln.Addr().String(), target: parsed.Host, conns: map[net.Conn]struct{}{}}
	parsed.Host = p.addr
	p.url = parsed.String()
	p.serve(ln)
	t.Cleanup(p.Stop)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// URL is the database's URL through the proxy.
func (p *Proxy) URL() string { return p.url }

// Start listens on the proxy's port again after Stop.
func (p *Proxy) Start() {
	p.t.Helper()
	var ln net.Listener
	var err error
	deadline := time.Now().Add(relistenTimeout)
	for {
		if ln, err = net.Listen("tcp", p.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(relistenPoll) // the port is still being released
	}
	if err != nil {
		p.t.Fatalf("pgtest: proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// Stop closes the port and cuts every connection, and returns once every
// relay has ended. Stopping a stopped proxy does nothing.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.relay(ln, c) })
		}
	})
}

// relay pipes c to the server until either side closes or Stop cuts both.
func (p *Proxy) relay(ln net.Listener, c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln { // stopped while dialing
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
	wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
