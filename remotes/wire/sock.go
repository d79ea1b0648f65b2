package wire

// The network connection under a WebSocket connection, for one look before
// a write: has the remote closed it? A remote that closes an idle
// connection (a restart, a load balancer's idle timeout) leaves its FIN
// with the system at once, but the reader learns of it only when it runs
// again, which on a busy machine may be long after; a call written in
// between is written where the remote will never read it, and fails as if
// the remote had failed it. The look costs one non-blocking system call:
// every write has it, a read only on a connection that was quiet
// (wsPeekQuiet, transport_ws.go).

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
)

// errPeerClosed is the cause for calls that found the connection closed by
// the remote before they were written.
var errPeerClosed = errors.New("connection closed by the remote")

type sockSlotKey struct{}

// sockSlot receives the network connection a WebSocket dial makes: the
// library keeps it to itself. http.Transport dials with the values of the
// handshake request's ctx.
type sockSlot struct {
	mu   sync.Mutex
	conn net.Conn
}

func withSockSlot(ctx context.Context, s *sockSlot) context.Context {
	return context.WithValue(ctx, sockSlotKey{}, s)
}

// keepSock leaves conn in ctx's slot, if ctx has one.
func keepSock(ctx context.Context, conn net.Conn) {
	if s, ok := ctx.Value(sockSlotKey{}).(*sockSlot); ok {
		s.mu.Lock()
		s.conn = conn
		s.mu.Unlock()
	}
}

// sock is the connection the dial left, nil when it left none or one
// without a descriptor.
func (s *sockSlot) sock() *sock {
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	k := &sock{raw: raw}
	k.peekFn = k.peek
	return k
}

// sock looks at a connection's descriptor. Only the connection's writer
// uses it.
type sock struct {
	raw    syscall.RawConn
	peekFn func(fd uintptr) // k.peek, made once
	closed bool             // peek's answer
	buf    [1]byte
}

// peerClosed reports whether the remote has closed the connection: the
// system holds its FIN or reset with nothing before it left to read. False
// when it cannot tell (data waits to be read, or k is nil). The descriptor
// is held while it is looked at (RawConn.Control), so the reader closing
// the connection meanwhile cannot hand the look another socket.
func (k *sock) peerClosed() bool {
	if k == nil {
		return false
	}
	if err := k.raw.Control(k.peekFn); err != nil {
		return true // closed on this side already
	}
	return k.closed
}

func (k *sock) peek(fd uintptr) {
	n, _, err := syscall.Recvfrom(int(fd), k.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch err {
	case nil:
		k.closed = n == 0
	case syscall.ECONNRESET, syscall.EPIPE, syscall.ETIMEDOUT:
		k.closed = true
	default: // EAGAIN: open, nothing to read
		k.closed = false
	}
}
