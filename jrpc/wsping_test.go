package jrpc

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// recordingListener's connections keep a copy of each write. They hide the
// socket's SyscallConn, so every write of the sock is one Write here.
type recordingListener struct {
	net.Listener
	mu     sync.Mutex
	writes [][]byte
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, l: l}, nil
}

func (l *recordingListener) recorded() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

type recordingConn struct {
	net.Conn
	l *recordingListener
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes = append(c.l.writes, append([]byte(nil), p...))
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// opcodes is the opcode of each whole frame in b.
func opcodes(b []byte) []byte {
	var ops []byte
	for len(b) > 0 {
		size, ok := frameSize(b)
		if !ok || size > int64(len(b)) {
			break
		}
		ops = append(ops, b[0]&0x0f)
		b = b[size:]
	}
	return ops
}

// notifyEvery has n write a notification of its sequence number every few
// milliseconds until stop returns true or a write fails; it returns how
// many it wrote.
func notifyEvery(t *testing.T, n Notifier, stop func() bool) (int, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	seq := 0
	for !stop() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %d notifications", seq)
		}
		ok, err := n.TryNotifySubscriptions([]SubscriptionNote{{ID: "0x1", Result: json.RawMessage(strconv.Itoa(seq))}})
		if err != nil {
			return seq, err
		}
		if ok {
			seq++
		}
		time.Sleep(5 * time.Millisecond)
	}
	return seq, nil
}

// A subscriber's pings ride in the writes of its notifications: a write
// carries a notification and the ping after it. A live peer answers them
// and stays, and gets every notification once, in order.
func TestWSPingRidesWithNotifications(t *testing.T) {
	ln := &recordingListener{}
	// Long enough that a loaded machine's stalls do not make a pong late.
	s, notifiers := notifierServerOn(t, Limits{WSPingInterval: 500 * time.Millisecond}, func(l net.Listener) net.Listener {
		ln.Listener = l
		return ln
	})
	var pings atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool { pings.Add(1); return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	n := subscribed(t, c, notifiers)

	got := make(chan string, 1<<12)
	go func() {
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				close(got)
				return
			}
			got <- string(msg)
		}
	}()
	sent, err := notifyEvery(t, n, func() bool { return pings.Load() >= 3 })
	if err != nil {
		t.Fatalf("after %d notifications: %v", sent, err)
	}
	for i := range sent {
		if msg, want := <-got, subscriptionJSON("0x1", strconv.Itoa(i)); msg != want {
			t.Fatalf("notification %d: got %s, want %s", i, msg, want)
		}
	}
	select {
	case <-n.Closed():
		t.Fatal("a peer that answers its pings was disconnected")
	default:
	}
	riding := 0
	for _, w := range ln.recorded() {
		ops := opcodes(w)
		if len(ops) == 2 && ops[0] == opcodeText && ops[1] == opcodePing {
			riding++
		}
	}
	if riding == 0 {
		t.Fatalf("%d pings, none in the write of a notification", pings.Load())
	}
}

// A peer that reads its notifications but never answers a ping is
// disconnected, though notifications keep going to it.
func TestWSPingPeerThatNeverAnswers(t *testing.T) {
	s, notifiers := notifierServer(t, Limits{WSPingInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool { return false },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	n := subscribed(t, c, notifiers)
	go func() {
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	closed := func() bool {
		select {
		case <-n.Closed():
			return true
		default:
			return false
		}
	}
	_, _ = notifyEvery(t, n, closed) // a write fails once the connection is gone
	select {
	case <-n.Closed():
	case <-ctx.Done():
		t.Fatal("a peer that never answers a ping is still connected")
	}
}

// A ping forgotten because the peer sent a message (it never left: no
// notification took it, and the writer's turn was taken) leaves nothing to
// answer: a peer quiet after it is pinged again, not judged to have missed
// it.
func TestWSPingForgottenIsNotMissed(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &wsConn{writeMu: make(chan struct{}, 1), sock: newSock(a), pinger: &wsPinger{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	defer c.cancel()
	p := c.pinger
	p.c = c
	c.writeMu <- struct{}{} // the turn is taken: no ping leaves by itself
	c.sock.noteWrites = 1   // a notification went out: the ping waits to ride
	const interval = time.Second
	if !p.judge(interval) {
		t.Fatal("first tick: judged missed with no ping out")
	}
	c.reads.Add(1) // the peer sends a message: alive, the ping forgotten
	if !p.judge(interval) {
		t.Fatal("tick after the peer's message: judged missed")
	}
	if !p.judge(interval) {
		t.Fatal("a quiet peer judged to have missed a ping that never left")
	}
	if pending, _, _ := c.sock.pingState(); !pending {
		t.Fatal("the quiet peer is not pinged again")
	}
}
