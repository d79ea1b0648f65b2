package jrpc

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// sock is a WebSocket's network connection under the WebSocket library.
// The library takes two locks, a select and a flush per message and
// writes each message to the network on its own; a subscription fan-out
// writes thousands of connections per block, and that is most of its
// cost. So notifications bypass it: writeNotes frames a connection's
// notifications itself (a server's text frames are unmasked, header and
// payload) and sends them in one write that never waits for the peer.
// What the socket does not take at once stays pending, and whatever is
// written behind it queues after it, until flush has sent it.
//
// Every write is ordered under mu, so bytes leave in the order they were
// written. The library's writes (answers, pings, pongs, close frames) are
// followed frame by frame: notifications go only between the library's
// frames, and never after its close frame. The library writes pings,
// pongs and close frames outside the connection's writer's turn, and such
// a write may wait for the peer (up to the library's control timeout):
// it does so with mu released, busy set, so that a try at notifications
// (the dispatcher's) finds the sock busy instead of waiting for the peer.
type sock struct {
	net.Conn
	// The socket's descriptor, written without the poller's locks, under mu:
	// Close takes mu, so no write is under way, and none starts, once the
	// descriptor may have gone back to the system. -1: the transport (TLS)
	// has no non-blocking write; flush sends it all.
	fd int

	mu       sync.Mutex
	idle     sync.Cond // on mu: busy turned false
	busy     bool      // Write is writing the library's bytes to the network
	flushing bool      // writeNotes left bytes pending: flush owns them
	buf      *[]byte   // pending; from sockBufs
	// The library's frame being written: its bytes still to come (0: the
	// next write starts a frame).
	rest      int64
	closeSent bool // the library wrote its close frame
	lost      bool // a frame's header came split: the frames can no longer be followed
	closed    bool // Close began

	// The pinger's (wsping.go): a ping frame that goes with the next
	// notifications, when the last left, and how many writes carried
	// notifications.
	ping        [10]byte
	pingPending bool
	pingSentAt  time.Time
	noteWrites  uint64
}

// SubscriptionNote is one eth_subscription notification: the subscription's
// id and its result, raw JSON sent as it is.
type SubscriptionNote struct {
	ID     string
	Result json.RawMessage
}

var (
	errCloseSent = errors.New("jrpc: websocket close frame sent")
	errFrameLost = errors.New("jrpc: websocket frames out of step")
	errSockBusy  = errors.New("jrpc: websocket library write in progress")
)

// sockBufs holds the buffers of notifications between writes: a connection
// keeps none while idle.
var sockBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxSockBuf keeps a rare huge batch from pinning its buffer in the pool.
const maxSockBuf = 1 << 20

func newSock(c net.Conn) *sock {
	s := &sock{Conn: c, fd: -1}
	s.idle.L = &s.mu
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) { s.fd = int(fd) })
		}
	}
	return s
}

// Close implements net.Conn. The library (and only it) closes the
// connection.
func (s *sock) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.Conn.Close()
}

// Write implements net.Conn: the library's frames. It waits for the peer
// unless something is pending, which it queues behind. It waits with mu
// released and busy set: notifications are neither written into the
// library's bytes nor kept waiting for the peer behind mu (writeNotes).
func (s *sock) Write(p []byte) (int, error) {
	s.mu.Lock()
	// The library writes one frame at a time (under its frame lock); this
	// keeps the order should two of its writes ever meet.
	for s.busy {
		s.idle.Wait()
	}
	s.followLocked(p)
	if s.flushing {
		*s.buf = append(*s.buf, p...)
		s.mu.Unlock()
		return len(p), nil
	}
	s.busy = true
	s.mu.Unlock()
	n, err := s.Conn.Write(p)
	s.mu.Lock()
	s.busy = false
	s.idle.Broadcast()
	s.mu.Unlock()
	return n, err
}

// followLocked follows the library's frames through p. The library flushes
// its buffer at each frame's end, and its headers are at most 14 bytes, so
// a frame's header always starts a write whole.
func (s *sock) followLocked(p []byte) {
	for len(p) > 0 && !s.lost {
		if s.rest == 0 {
			size, ok := frameSize(p)
			if !ok {
				s.lost = true
				return
			}
			if p[0]&0x0f == opcodeClose {
				s.closeSent = true
			}
			s.rest = size
		}
		n := min(int64(len(p)), s.rest)
		s.rest -= n
		p = p[n:]
	}
}

const (
	opcodeText  = 0x1
	opcodeClose = 0x8
	opcodePing  = 0x9
	finBit      = 0x80
	maskBit     = 0x80
)

// frameSize is the size of the frame whose header starts b, header
// included; false when b does not hold the whole header.
func frameSize(b []byte) (int64, bool) {
	if len(b) < 2 {
		return 0, false
	}
	head, n := int64(2), int64(b[1]&0x7f)
	switch n {
	case 126:
		if len(b) < 4 {
			return 0, false
		}
		head, n = 4, int64(binary.BigEndian.Uint16(b[2:]))
	case 127:
		if len(b) < 10 {
			return 0, false
		}
		head, n = 10, int64(binary.BigEndian.Uint64(b[2:])&(1<<63-1))
	}
	if b[1]&maskBit != 0 {
		head += 4
	}
	return head + n, true
}

// writeNotes frames notes, geth's eth_subscription notifications, as text
// messages and writes them in one write that does not wait for the peer.
// done is false when the socket did not take all of them: the rest is
// pending, and the caller must flush. The caller has the connection's
// writer's turn, so the library is not in the middle of a data frame; it
// may still be writing a control frame (busy): with wait writeNotes waits
// for that write to end (the peer takes it, or the library's timeout or
// the caller's write timer closes the connection); without, it writes
// nothing and returns errSockBusy.
func (s *sock) writeNotes(notes []SubscriptionNote, wait bool) (done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.busy {
		if !wait {
			return false, errSockBusy
		}
		s.idle.Wait()
	}
	switch {
	case s.closeSent:
		return true, errCloseSent
	case s.lost || s.rest != 0:
		return true, errFrameLost
	}
	if s.buf == nil {
		s.buf = sockBufs.Get().(*[]byte)
	}
	b := *s.buf
	for _, nt := range notes {
		b = appendNoteFrame(b, nt)
	}
	if len(notes) > 0 {
		s.noteWrites++
	}
	if s.pingPending {
		b = append(b, s.ping[:]...)
		s.pingPending = false
		s.pingSentAt = time.Now()
	}
	*s.buf = b
	if s.flushing {
		return false, nil
	}
	n, err := s.writeNow(b)
	switch {
	case err != nil:
		s.dropBufLocked()
		return true, err
	case n < len(b):
		*s.buf = b[:copy(b, b[n:])]
		s.flushing = true
		return false, nil
	}
	s.dropBufLocked()
	return true, nil
}

// queuePing has the next notifications (or sendPing) carry a ping whose
// payload is seq.
func (s *sock) queuePing(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ping[0], s.ping[1] = finBit|opcodePing, 8
	binary.BigEndian.PutUint64(s.ping[2:], seq)
	s.pingPending = true
}

// dropPing forgets a ping that has not left.
func (s *sock) dropPing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pingPending = false
}

// pingState says whether a ping waits to leave, when the last one left,
// and how many writes have carried notifications.
func (s *sock) pingState() (pending bool, sentAt time.Time, noteWrites uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pingPending, s.pingSentAt, s.noteWrites
}

// The parts of a notification around its id and its result.
const (
	notePrefix = `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":`
	noteMiddle = `,"result":`
	noteSuffix = `}}`
)

// appendNoteFrame appends nt as one WebSocket text frame (FIN, unmasked, as
// a server sends it) of geth's notification:
// {"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":<id>,"result":<result>}}.
func appendNoteFrame(b []byte, nt SubscriptionNote) []byte {
	var idb [80]byte
	id := AppendString(idb[:0], nt.ID)
	n := len(notePrefix) + len(id) + len(noteMiddle) + len(nt.Result) + len(noteSuffix)
	b = append(b, finBit|opcodeText)
	switch {
	case n <= 125:
		b = append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, notePrefix...)
	b = append(b, id...)
	b = append(b, noteMiddle...)
	b = append(b, nt.Result...)
	return append(b, noteSuffix...)
}

// flush sends what writeNotes left pending, and what was written behind
// it, waiting for the peer; the caller bounds how long.
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
		s.buf = sockBufs.Get().(*[]byte)
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
// no non-blocking write (TLS), none. The caller holds mu.
func (s *sock) writeNow(b []byte) (int, error) {
	switch {
	case s.closed:
		return 0, net.ErrClosed
	case s.fd < 0:
		return 0, nil
	}
	n := 0
	for n < len(b) {
		// The socket is non-blocking, so the write returns at once: a raw
		// syscall spares the scheduler's bookkeeping for a blocking one,
		// and the P it would hand to another thread when the kernel's
		// loopback work outlasts a sysmon tick.
		r, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(s.fd),
			uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			return n, nil
		case errno != 0:
			return n, errno
		case r == 0:
			return n, nil
		}
		n += int(r)
	}
	return n, nil
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
