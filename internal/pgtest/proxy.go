package pgtest

import (
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

// proxyBuffer is what one direction of a relay reads at a time, and so
// the most a paused relay holds per direction beyond the kernel's buffers.
const proxyBuffer = 32 << 10

// Proxy relays a loopback port to the server of a database: a Postgres
// that can go away. Stop closes the port and cuts every connection, an
// outage as a client sees it; Start listens on the same port again.
// Pause makes it a Postgres that stalls instead: connections are accepted
// and bytes read, but nothing is passed on either way until Resume.
type Proxy struct {
	t      testing.TB
	url    string // the database's URL through the proxy
	addr   string
	target string

	mu     sync.Mutex
	ln     net.Listener // nil while stopped
	relays map[*relay]struct{}
	held   chan struct{} // non-nil while paused; Resume closes it
	wg     sync.WaitGroup
}

// relay is one client connection and its connection to the server.
type relay struct {
	client, server net.Conn
	cut            chan struct{} // closed by Stop: bytes held are dropped
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
	p := &Proxy{t: t, addr: ln.Addr().String(), target: parsed.Host, relays: map[*relay]struct{}{}}
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

// Stop closes the port and cuts every connection (dropping what a pause
// holds), and returns once every relay has ended. Stopping a stopped proxy
// does nothing. A paused proxy stays paused: after Start its new
// connections stall too.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for r := range p.relays {
		r.client.Close()
		r.server.Close()
		close(r.cut)
		delete(p.relays, r)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Pause stalls the database: connections, old and new, stay open and
// what either side sends is read but held, so that every call waits as on
// a server that stopped answering (or a network that drops packets) until
// Resume passes the held bytes on. Pausing a paused proxy does nothing.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Resume ends a pause: the bytes held go on, in order.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// holding returns what a relay waits on before passing bytes on: nil
// unless paused.
func (p *Proxy) holding() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
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
			p.wg.Go(func() { p.serveConn(ln, c) })
		}
	})
}

// serveConn relays c to the server until either side closes or Stop cuts
// both.
func (p *Proxy) serveConn(ln net.Listener, c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		c.Close()
		return
	}
	r := &relay{client: c, server: up, cut: make(chan struct{})}
	p.mu.Lock()
	if p.ln != ln { // stopped while dialing
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.relays[r] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(up, c, r.cut); up.Close() })
	wg.Go(func() { p.pipe(c, up, r.cut); c.Close() })
	wg.Wait()
	p.mu.Lock()
	delete(p.relays, r)
	p.mu.Unlock()
}

// pipe copies src to dst, holding what it read while the proxy is paused,
// until either fails or cut is closed.
func (p *Proxy) pipe(dst, src net.Conn, cut <-chan struct{}) {
	buf := make([]byte, proxyBuffer)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if held := p.holding(); held != nil {
				select {
				case <-held:
				case <-cut:
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
