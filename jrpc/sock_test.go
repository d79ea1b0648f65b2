package jrpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/testkit"
)

// notifierServer serves eth_subscribe by handing its connection's Notifier
// to the test once the reply is written.
func notifierServer(t *testing.T, lim Limits) (*testServer, chan Notifier) {
	t.Helper()
	return notifierServerOn(t, lim, nil)
}

// notifierServerOn is notifierServer on wrap's listener (newTestServerOn).
func notifierServerOn(t *testing.T, lim Limits, wrap func(net.Listener) net.Listener) (*testServer, chan Notifier) {
	t.Helper()
	notifiers := make(chan Notifier, 1)
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		if req.Method != "eth_subscribe" {
			return json.RawMessage(`"pong"`), nil
		}
		n, _ := NotifierFromContext(ctx)
		if !AfterReply(ctx, func() { notifiers <- n }) {
			return nil, errors.New("no reply to hold notifications for")
		}
		return json.RawMessage(`"0x1"`), nil
	})
	return newTestServerOn(t, Options{Limits: lim}, h, wrap), notifiers
}

func subscribed(t *testing.T, c *websocket.Conn, notifiers chan Notifier) Notifier {
	t.Helper()
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":1,"result":"0x1"}`; got != want {
		t.Fatalf("reply: got %s, want %s", got, want)
	}
	return <-notifiers
}

func subscriptionJSON(id, result string) string {
	return `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"` + id + `","result":` + result + `}}`
}

// A batch written in one go arrives as one WebSocket message per
// notification, in order, each geth's exact JSON; a call answered between
// batches comes between them.
func TestWSNotifySubscriptionsBatch(t *testing.T) {
	s, notifiers := notifierServer(t, Limits{})
	c := s.dial(t)
	n := subscribed(t, c, notifiers)

	first := []SubscriptionNote{
		{ID: "0x1", Result: json.RawMessage(`{"number":"0x1","extra":"é\u2028"}`)},
		{ID: "0xab", Result: json.RawMessage(`"0x2"`)},
		{ID: "0x1", Result: json.RawMessage(`[]`)},
	}
	ok, err := n.TryNotifySubscriptions(first)
	if !ok || err != nil {
		t.Fatalf("TryNotifySubscriptions = %v, %v; want true, nil", ok, err)
	}
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	var want []string
	for _, nt := range first {
		want = append(want, subscriptionJSON(nt.ID, string(nt.Result)))
	}
	for i, w := range want {
		if got := testkit.WSRead(t, c); got != w {
			t.Fatalf("message %d: got %s, want %s", i, got, w)
		}
	}
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":2,"result":"pong"}`; got != want {
		t.Fatalf("answer: got %s, want %s", got, want)
	}
	if err := n.NotifySubscriptions(context.Background(), first[1:]); err != nil {
		t.Fatal(err)
	}
	for i, w := range want[1:] {
		if got := testkit.WSRead(t, c); got != w {
			t.Fatalf("blocking batch, message %d: got %s, want %s", i, got, w)
		}
	}
}

// bigNotes is a batch of notifications of about 64 KiB each, numbered from
// seq.
func bigNotes(seq, count int) []SubscriptionNote {
	pad := strings.Repeat("f", 64<<10)
	notes := make([]SubscriptionNote, count)
	for i := range notes {
		notes[i] = SubscriptionNote{ID: "0x1", Result: json.RawMessage(fmt.Sprintf(`{"seq":%d,"pad":"%s"}`, seq+i, pad))}
	}
	return notes
}

// A client that does not read: a try never waits for it. The socket takes
// what it can, the rest goes in the background, and until it has, another
// try finds the turn taken and writes nothing. Once the client reads, it
// gets every notification once, in order, whole.
func TestWSTryNotifyBehindAClientThatDoesNotRead(t *testing.T) {
	// What the loopback buffers took (tens of MiB) goes to the client only
	// once it reads, which a loaded machine running the race detector
	// takes seconds to do: the background write's WSWriteTimeout, armed
	// before the client begins to read, and the waits below are failure
	// bounds only, far past that. No ping either: the client answers one
	// only while it reads.
	const slow = 2 * time.Minute
	s, notifiers := notifierServer(t, Limits{WSWriteTimeout: slow, WSPingInterval: slow})
	c := s.dial(t)
	n := subscribed(t, c, notifiers)

	const batch = 16 // 1 MiB a try; loopback buffers hold tens
	sent := 0
	for tries := 0; ; tries++ {
		if tries == 256 {
			t.Fatal("256 MiB written to a client that does not read, and every try went through")
		}
		// A try that waited for the client would never return, since the
		// client never reads: the bound is only there to fail, not hang,
		// and allows a loaded machine's slowest 1 MiB write.
		type try struct {
			ok  bool
			err error
		}
		done := make(chan try, 1)
		go func() {
			ok, err := n.TryNotifySubscriptions(bigNotes(sent, batch))
			done <- try{ok, err}
		}()
		var r try
		select {
		case r = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("a try did not return in 30s: it waits for the client")
		}
		ok, err := r.ok, r.err
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break // the turn is the background write's
		}
		sent += batch
	}
	if sent == 0 {
		t.Fatal("the first try wrote nothing")
	}

	// The client reads; the background write ends, and a try gets through
	// again: its notification comes last.
	got := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			_, b, err := c.Read(context.Background())
			if err != nil {
				got <- err
				return
			}
			var m struct {
				Params struct {
					Result struct{ Seq int }
				}
			}
			if err := json.Unmarshal(b, &m); err != nil {
				got <- fmt.Errorf("message %d: %w", i, err)
				return
			}
			if m.Params.Result.Seq != i {
				got <- fmt.Errorf("message %d has seq %d", i, m.Params.Result.Seq)
				return
			}
			if i == sent {
				got <- nil
				return
			}
		}
	}()
	testkit.WaitFor(t, slow, "a try to get through once the client reads", func() bool {
		ok, err := n.TryNotifySubscriptions(bigNotes(sent, 1))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(slow):
		t.Fatal("the client did not get every notification")
	}
}

// What the network did not take goes out within ws_write_timeout, or the
// connection closes.
func TestWSTryNotifyBackgroundWriteTimesOut(t *testing.T) {
	s, notifiers := notifierServer(t, Limits{WSWriteTimeout: 200 * time.Millisecond})
	c := s.dial(t)
	n := subscribed(t, c, notifiers)
	for tries := 0; ; tries++ {
		if tries == 256 {
			t.Fatal("every try went through to a client that does not read")
		}
		ok, err := n.TryNotifySubscriptions(bigNotes(0, 16))
		if err != nil || !ok {
			break
		}
	}
	select {
	case <-n.Closed():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection of a client that does not read stayed open past ws_write_timeout")
	}
}

// tcpPair is both ends of a loopback TCP connection, closed at cleanup.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// readFrames reads n frames from r: opcode and payload of each.
func readFrames(t *testing.T, r io.Reader, n int) [][2]string {
	t.Helper()
	br := bufio.NewReader(r)
	var out [][2]string
	for range n {
		head, err := br.Peek(2)
		if err != nil {
			t.Fatalf("frame header: %v", err)
		}
		switch head[1] & 0x7f {
		case 126:
			head, err = br.Peek(4)
		case 127:
			head, err = br.Peek(10)
		}
		if err != nil {
			t.Fatalf("frame header: %v", err)
		}
		size, ok := frameSize(head)
		if !ok {
			t.Fatalf("frame header % x", head)
		}
		f := make([]byte, size)
		if _, err := io.ReadFull(br, f); err != nil {
			t.Fatalf("frame: %v", err)
		}
		hl := 2
		switch f[1] & 0x7f {
		case 126:
			hl = 4
		case 127:
			hl = 10
		}
		out = append(out, [2]string{fmt.Sprint(f[0] & 0x0f), string(f[hl:])})
	}
	return out
}

// frame is a server's unmasked FIN frame.
func frame(op byte, payload string) []byte {
	b := []byte{finBit | op}
	switch n := len(payload); {
	case n <= 125:
		b = append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		t := make([]byte, 8)
		binary.BigEndian.PutUint64(t, uint64(n))
		b = append(append(b, 127), t...)
	}
	return append(b, payload...)
}

// Notifications written next to the library's frames go between them,
// never into one (a large frame comes in several writes) and never after
// its close frame.
func TestSockNotesBetweenLibraryFrames(t *testing.T) {
	server, client := tcpPair(t)
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bug fails, not hangs
	s := newSock(server)
	note := []SubscriptionNote{{ID: "0x1", Result: json.RawMessage(`"0x2"`)}}
	wantNote := subscriptionJSON("0x1", `"0x2"`)

	big := frame(opcodeText, strings.Repeat("a", 70_000)) // 64-bit length
	// The library writes a large frame in parts, as its 4 KiB buffer fills.
	if _, err := s.Write(big[:4096]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writeNotes(note, false); !errors.Is(err, errFrameLost) {
		t.Fatalf("notes in the middle of a frame: %v, want errFrameLost", err)
	}
	if _, err := s.Write(big[4096:]); err != nil {
		t.Fatal(err)
	}
	if done, err := s.writeNotes(note, false); !done || err != nil {
		t.Fatalf("notes after the frame: %v, %v", done, err)
	}
	if _, err := s.Write(frame(0x9, "ping")); err != nil {
		t.Fatal(err)
	}
	if done, err := s.writeNotes(append(note, note...), false); !done || err != nil {
		t.Fatalf("notes after a ping: %v, %v", done, err)
	}
	if _, err := s.Write(frame(opcodeClose, "\x03\xe8bye")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writeNotes(note, false); !errors.Is(err, errCloseSent) {
		t.Fatalf("notes after the close frame: %v, want errCloseSent", err)
	}

	want := [][2]string{
		{"1", strings.Repeat("a", 70_000)},
		{"1", wantNote},
		{"9", "ping"},
		{"1", wantNote},
		{"1", wantNote},
		{"8", "\x03\xe8bye"},
	}
	got := readFrames(t, client, len(want))
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d: got opcode %s, %.60q; want opcode %s, %.60q", i, got[i][0], got[i][1], want[i][0], want[i][1])
		}
	}
}

// holdingListener's connections hold a write once the test asks: the
// write of a peer whose socket takes nothing more. (A real socket cannot
// be filled to the byte on purpose: how much it takes, and when it takes
// more, is the kernel's.) The non-blocking writes of notifications go
// under it, to the socket itself.
type holdingListener struct {
	net.Listener
	holds chan chan struct{} // the next write takes one and waits for it to close
	held  chan struct{}      // a write is being held
}

func (l *holdingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &holdingConn{TCPConn: c.(*net.TCPConn), l: l}, nil
}

type holdingConn struct {
	*net.TCPConn // its SyscallConn too: the sock's non-blocking write
	l            *holdingListener
}

func (c *holdingConn) Write(p []byte) (int, error) {
	select {
	case release := <-c.l.holds:
		c.l.held <- struct{}{}
		<-release
	default:
	}
	return c.TCPConn.Write(p)
}

// A ping (or pong, or close frame) the library writes outside the
// writer's turn may wait for a peer that does not read. A try at
// notifications meanwhile does not wait for it: the turn is taken, and
// nothing is written. The notifications written next, in the turn, wait
// for the ping's frame and follow it whole, once each.
func TestWSTryNotifyBesideAPingThePeerHoldsUp(t *testing.T) {
	hl := &holdingListener{holds: make(chan chan struct{}, 1), held: make(chan struct{}, 1)}
	s, notifiers := notifierServerOn(t, Limits{WSPingInterval: time.Hour}, func(ln net.Listener) net.Listener {
		hl.Listener = ln
		return hl
	})
	var pings atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool { pings.Add(1); return true },
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	n := subscribed(t, c, notifiers)

	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	defer letGo() // a failure below still ends the held write
	hl.holds <- release
	pinged := make(chan error, 1)
	go func() { pinged <- n.(*wsConn).conn.Ping(ctx) }()
	select {
	case <-hl.held:
	case <-ctx.Done():
		t.Fatal("the ping was never written")
	}

	note := func(seq int) []SubscriptionNote {
		return []SubscriptionNote{{ID: "0x1", Result: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, seq))}}
	}
	type try struct {
		ok  bool
		err error
	}
	tried := make(chan try, 1)
	go func() {
		ok, err := n.TryNotifySubscriptions(note(1))
		tried <- try{ok, err}
	}()
	select {
	case got := <-tried:
		if got.ok || got.err != nil {
			t.Fatalf("TryNotifySubscriptions beside a held ping = %v, %v; want false, nil", got.ok, got.err)
		}
	case <-ctx.Done():
		t.Fatal("TryNotifySubscriptions waited for the peer to take the library's ping")
	}

	// The writer's turn, as a subscriber's writer takes it after a refused
	// try: it waits for the ping's frame to be written.
	written := make(chan error, 1)
	go func() { written <- n.NotifySubscriptions(ctx, note(1)) }()
	letGo()
	if got, want := testkit.WSRead(t, c), subscriptionJSON("0x1", `{"seq":1}`); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if got := pings.Load(); got != 1 {
		t.Fatalf("the notification came after %d pings, want after the one", got)
	}
	for what, ch := range map[string]chan error{"the notification's write": written, "the ping": pinged} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not end", what)
		}
	}
	if ok, err := n.TryNotifySubscriptions(note(2)); !ok || err != nil {
		t.Fatalf("TryNotifySubscriptions once the ping is out = %v, %v; want true, nil", ok, err)
	}
	if got, want := testkit.WSRead(t, c), subscriptionJSON("0x1", `{"seq":2}`); got != want {
		t.Fatalf("next message: got %s, want %s (each notification once)", got, want)
	}
}

// Once the library closed the connection, notifications fail: nothing is
// written to a descriptor the system may have given to another file.
func TestSockNotesAfterClose(t *testing.T) {
	server, _ := tcpPair(t)
	s := newSock(server)
	if s.fd < 0 {
		t.Fatal("a TCP connection's sock has no descriptor to write")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	done, err := s.writeNotes([]SubscriptionNote{{ID: "0x1", Result: json.RawMessage(`1`)}}, false)
	if !done || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("writeNotes after Close = %v, %v; want true, net.ErrClosed", done, err)
	}
}
