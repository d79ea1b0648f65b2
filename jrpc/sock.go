package jrpc

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// sock is a WebSocket's network connection as the WebSocket library writes
// to it. The library flushes every message with a write of its own; a
// subscription fan-out writes a connection several notifications per
// block, and on loopback or a LAN each write is most of a notification's
// cost. While corked, what the library writes (whole frames: it flushes
// only at a frame's end) is collected instead, and uncork sends all of it
// in one write that never waits for the peer: what the socket does not
// take at once stays pending, and writes behind it queue after it, until
// flush has sent it. Every write goes through mu, so frames leave in the
// order the library wrote them (a close frame never overtakes the
// notifications before it).
type sock struct {
	net.Conn
	raw syscall.RawConn // nil: the transport (TLS) has no non-blocking write; flush sends it all

	mu       sync.Mutex
	corked   bool
	flushing bool    // uncork left bytes pending: flush owns them
	buf      *[]byte // collected while corked or flushing; from sockBufs
}

// sockBufs holds the buffers of corked writes between batches: a
// connection keeps none while idle.
var sockBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxSockBuf keeps a rare huge batch from pinning its buffer in the pool.
const maxSockBuf = 1 << 20

func newSock(c net.Conn) *sock {
	s := &sock{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
		}
	}
	return s
}

// Write implements net.Conn: the library's frames.
func (s *sock) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.corked || s.flushing {
		if s.buf == nil {
			s.buf = sockBufs.Get().(*[]byte)
		}
		*s.buf = append(*s.buf, p...)
		return len(p), nil
	}
	return s.Conn.Write(p)
}

// cork collects writes until uncork.
func (s *sock) cork() {
	s.mu.Lock()
	s.corked = true
	s.mu.Unlock()
}

// uncork sends what was collected in one write that does not wait for the
// peer. done is false when the socket did not take all of it: the rest is
// pending, and the caller must flush.
func (s *sock) uncork() (done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.corked = false
	if s.flushing {
		return false, nil
	}
	if s.buf == nil {
		return true, nil
	}
	b := *s.buf
	n, err := s.writeNow(b)
	if err != nil {
		s.dropBufLocked()
		return true, err
	}
	if n < len(b) {
		*s.buf = b[:copy(b, b[n:])]
		s.flushing = true
		return false, nil
	}
	s.dropBufLocked()
	return true, nil
}

// flush sends what uncork left pending, and what was written behind it,
// waiting for the peer; the caller bounds how long.
func (s *sock) flush() error {
	for {
		s.mu.Lock()
		if s.buf == nil || len(*s.buf) == 0 {
			s.flushing = false
			s.dropBufLocked()
			s.mu.Unlock()
			return nil
		}
		bp := s.buf
		s.buf = nil
		s.mu.Unlock()
		_, err := s.Conn.Write(*bp)
		putSockBuf(bp)
		if err != nil {
			s.mu.Lock()
			s.flushing = false
			s.dropBufLocked()
			s.mu.Unlock()
			return err
		}
	}
}

func (s *sock) dropBufLocked() {
	if s.buf != nil {
		putSockBuf(s.buf)
		s.buf = nil
	}
}

func putSockBuf(bp *[]byte) {
	if cap(*bp) <= maxSockBuf {
		*bp = (*bp)[:0]
		sockBufs.Put(bp)
	}
}

// writeNow writes as much of b as the socket takes without waiting; with
// no non-blocking write (TLS), none.
func (s *sock) writeNow(b []byte) (int, error) {
	if s.raw == nil {
		return 0, nil
	}
	var n int
	var werr error
	err := s.raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
			case err != nil:
				werr = err
			case m > 0:
				continue
			}
			break
		}
		return true // one try: never wait for the peer here
	})
	return n, errors.Join(err, werr)
}

// sockHijacker gives the library the hijacked connection as a sock.
type sockHijacker struct {
	http.ResponseWriter
	h    http.Hijacker
	sock *sock // set by Hijack
}

// withSock wraps w so that the WebSocket library's connection is a sock;
// w itself when it cannot be hijacked (the library answers that).
func withSock(w http.ResponseWriter) http.ResponseWriter {
	for rw := w; ; {
		switch t := rw.(type) {
		case http.Hijacker:
			return &sockHijacker{ResponseWriter: w, h: t}
		case interface{ Unwrap() http.ResponseWriter }:
			rw = t.Unwrap()
		default:
			return w
		}
	}
}

// Hijack implements http.Hijacker. The library writes to the buffered
// writer it returns, which net/http hands over empty: it now writes to the
// sock.
func (w *sockHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := w.h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		nc.Close()
		return nil, nil, err
	}
	w.sock = newSock(nc)
	brw.Writer.Reset(w.sock)
	return w.sock, brw, nil
}

func (w *sockHijacker) Unwrap() http.ResponseWriter { return w.ResponseWriter }
