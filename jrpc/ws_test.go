package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/venn-gateway/venn/internal/testkit"
)

func call(id int, method string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + method + `","params":[` + strconv.Itoa(id) + `]}`
}

func TestWSConcurrentCalls(t *testing.T) {
	const calls = 8
	var active atomic.Int32
	all := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		// No call answers before all are in flight: only concurrent
		// serving gets past this.
		if active.Add(1) == calls {
			close(all)
		}
		select {
		case <-all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return req.Params, nil
	})
	s := newTestServer(t, Options{}, h)
	c := s.dial(t)
	for i := range calls {
		testkit.WSWrite(t, c, call(i, "m"))
	}
	var got []string
	for range calls {
		got = append(got, testkit.WSRead(t, c))
	}
	sort.Strings(got)
	var want []string
	for i := range calls {
		want = append(want, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"result":[`+strconv.Itoa(i)+`]}`)
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("answers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWSInFlightBackpressure(t *testing.T) {
	const inFlight = 2
	var active, peak, served atomic.Int32
	gate := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		served.Add(1)
		n := active.Add(1)
		defer active.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return req.Params, nil
	})
	s := newTestServer(t, Options{Limits: Limits{WSInFlight: inFlight}}, h)
	c := s.dial(t)
	for i := range 5 {
		testkit.WSWrite(t, c, call(i, "m"))
	}
	waitFor(t, "the connection to fill its slots", func() bool { return active.Load() == inFlight })
	close(gate)
	for range 5 {
		testkit.WSRead(t, c)
	}
	if p := peak.Load(); p != inFlight {
		t.Errorf("peak calls in flight = %d, want %d", p, inFlight)
	}
	if n := served.Load(); n != 5 {
		t.Errorf("served %d calls, want 5", n)
	}
}

func TestWSMessageLimit(t *testing.T) {
	const limit = 1024
	s := newTestServer(t, Options{Limits: Limits{MaxWSMessageBytes: limit}}, echoHandler())
	const head, tail = `{"jsonrpc":"2.0","id":1,"method":"test_echo","params":["`, `"]}`
	echoOf := func(n int) string { return head + strings.Repeat("x", n-len(head)-len(tail)) + tail }
	tooBig := `{"jsonrpc":"2.0","id":null,"error":{"code":-32052,"message":"message exceeds max_ws_message_bytes (1024 bytes)"}}`
	tests := []struct {
		name      string
		give      string
		want      string               // the answer
		wantClose websocket.StatusCode // then the connection closes; 0: it stays open
	}{
		{name: "at limit", give: echoOf(limit), want: `{"jsonrpc":"2.0","id":1,"result":["` + strings.Repeat("x", limit-len(head)-len(tail)) + `"]}`},
		{name: "over limit", give: echoOf(limit + 1), want: tooBig},
		{name: "at discard cap", give: echoOf(limit + wsDiscardFactor*limit), want: tooBig},
		// Too much to read past: still the error, then the close.
		{name: "past discard cap", give: echoOf(limit + wsDiscardFactor*limit + 2), want: tooBig, wantClose: websocket.StatusMessageTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.dial(t)
			testkit.WSWrite(t, c, tt.give)
			if got := testkit.WSRead(t, c); got != tt.want {
				t.Fatalf("got %.200s\nwant %.200s", got, tt.want)
			}
			if tt.wantClose != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _, err := c.Read(ctx)
				if got := websocket.CloseStatus(err); got != tt.wantClose {
					t.Fatalf("read error = %v, want close status %d", err, tt.wantClose)
				}
				return
			}
			// The connection is still good.
			testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":2,"method":"test_echo","params":[2]}`)
			if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":2,"result":[2]}`; got != want {
				t.Errorf("next call: got %s, want %s", got, want)
			}
		})
	}
}

func TestWSConnectionLimit(t *testing.T) {
	const limit = 2
	s := newTestServer(t, Options{Limits: Limits{MaxConnections: limit}}, echoHandler())
	conns := []*websocket.Conn{s.dial(t), s.dial(t)}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, s.wsURL(), nil)
	if err == nil {
		c.CloseNow()
		t.Fatal("dial over max_connections succeeded")
	}
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial over the limit: %v, response %v; want 503", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if e := decodeErrorBody(t, body); e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "max_connections (2)") {
		t.Errorf("error = %d %q, want %d naming max_connections", e.Code, e.Message, CodeLimitExceeded)
	}

	// A freed slot is usable again.
	conns[0].Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the server to let the connection go", func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.nconns < limit
	})
	c = s.dial(t)
	testkit.WSWrite(t, c, call(1, "test_echo"))
	if got := testkit.WSRead(t, c); got != `{"jsonrpc":"2.0","id":1,"result":[1]}` {
		t.Errorf("got %s", got)
	}
}

func TestWSConnectionLimitPerIP(t *testing.T) {
	s := newTestServer(t, Options{Limits: Limits{MaxConnsPerIP: 2}}, echoHandler())
	first := s.dial(t)
	s.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, s.wsURL(), nil)
	if err == nil {
		c.CloseNow()
		t.Fatal("a third connection from one address was let in")
	}
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("dial over the per-address limit: %v; want 429", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if e := decodeErrorBody(t, body); e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "max_connections_per_ip (2)") {
		t.Errorf("error = %d %q, want %d naming max_connections_per_ip", e.Code, e.Message, CodeLimitExceeded)
	}
	first.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the server to let the connection go", func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.nconns < 2
	})
	s.dial(t)
}

func TestWSShutdown(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		if req.Method == "slow" {
			close(started)
			<-release
		}
		return json.RawMessage(`"done"`), nil
	})
	s := newTestServer(t, Options{}, h)
	c := s.dial(t)
	testkit.WSWrite(t, c, call(1, "slow"))
	<-started

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	waitFor(t, "shutdown to begin", s.closing.Load)

	// While draining, new calls are refused and the call in flight is
	// answered; then the connection is closed with 1001.
	testkit.WSWrite(t, c, call(2, "fast"))
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":2,"error":{"code":-32054,"message":"server is shutting down"}}`; got != want {
		t.Errorf("call during shutdown: got %s, want %s", got, want)
	}
	close(release)
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":1,"result":"done"}`; got != want {
		t.Errorf("call in flight: got %s, want %s", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || ce.Reason != shutdownReason {
		t.Errorf("read after shutdown = %v, want close %d %q", err, websocket.StatusGoingAway, shutdownReason)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}

	// No new connections.
	_, resp, err := websocket.Dial(ctx, s.wsURL(), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("dial after shutdown: %v, want 503", err)
	}
}

func TestWSNotifier(t *testing.T) {
	notifiers := make(chan Notifier, 1)
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		n, ok := NotifierFromContext(ctx)
		if !ok {
			return nil, errors.New("no notifier")
		}
		// The first notification must follow the subscription id.
		if !AfterReply(ctx, func() {
			if err := n.Notify(context.Background(), "eth_subscription", json.RawMessage(`{"subscription":"0x1","result":1}`)); err != nil {
				t.Errorf("notify: %v", err)
			}
			notifiers <- n
		}) {
			return nil, errors.New("no reply to hold notifications for")
		}
		return json.RawMessage(`"0x1"`), nil
	})
	s := newTestServer(t, Options{}, h)
	c := s.dial(t)
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":1,"result":"0x1"}`; got != want {
		t.Errorf("reply: got %s, want %s", got, want)
	}
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x1","result":1}}`; got != want {
		t.Errorf("notification: got %s, want %s", got, want)
	}

	n := <-notifiers
	select {
	case <-n.Closed():
		t.Fatal("notifier closed while the connection is open")
	default:
	}
	afterClose := make(chan struct{})
	n.AfterClose(func() { close(afterClose) })
	c.Close(websocket.StatusNormalClosure, "")
	select {
	case <-n.Closed():
	case <-time.After(5 * time.Second):
		t.Fatal("notifier not closed with its connection")
	}
	select {
	case <-afterClose:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterClose's func did not run when the connection closed")
	}
	if err := n.Notify(context.Background(), "eth_subscription", nil); !errors.Is(err, ErrConnClosed) {
		t.Errorf("Notify after close = %v, want ErrConnClosed", err)
	}
}

func TestWSCloseCancelsCalls(t *testing.T) {
	started := make(chan struct{})
	canceled := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		close(canceled)
		return nil, ctx.Err()
	})
	s := newTestServer(t, Options{}, h)
	c := s.dial(t)
	testkit.WSWrite(t, c, call(1, "m"))
	<-started
	c.CloseNow()
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("call not canceled when its connection closed")
	}
}

func TestWSPing(t *testing.T) {
	// A live peer's pong must arrive within half an interval to a whole one:
	// long enough that a loaded CI machine's stalls do not make it late.
	const interval = 500 * time.Millisecond
	s := newTestServer(t, Options{Limits: Limits{WSPingInterval: interval}}, echoHandler())
	open := func() int {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.nconns
	}

	// A live peer answers pings (its reader runs) and stays.
	var pings atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	live, _, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{
		OnPingReceived: func(context.Context, []byte) bool { pings.Add(1); return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer live.CloseNow()
	live.CloseRead(ctx)
	waitFor(t, "three pings", func() bool { return pings.Load() >= 3 })
	if n := open(); n != 1 {
		t.Fatalf("open connections = %d, want the live one", n)
	}

	// A peer that reads nothing never answers, and is dropped.
	dead := s.dial(t)
	waitFor(t, "two connections", func() bool { return open() == 2 })
	waitFor(t, "the silent peer to be dropped", func() bool { return open() == 1 })
	_ = dead
}

func TestWSPeer(t *testing.T) {
	s := newTestServer(t, Options{}, echoHandler())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{HTTPHeader: http.Header{"X-Test": {"hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"test_peer"}`)
	if got, want := testkit.WSRead(t, c), `{"jsonrpc":"2.0","id":1,"result":"ws hi"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestWSDisconnect: a handler's Disconnect reaches the client as its close
// code and reason and ends the connection; the close belongs to the
// connection, so once Shutdown has waited for the connection it is over,
// and a Disconnect after that has nothing to close.
func TestWSDisconnect(t *testing.T) {
	notifiers := make(chan Notifier, 1)
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		n, _ := NotifierFromContext(ctx)
		notifiers <- n
		n.Disconnect(4000, "bye")
		n.Disconnect(4001, "ignored: the first close wins")
		return json.RawMessage(`true`), nil
	})
	s := newTestServer(t, Options{}, h)
	c := s.dial(t)
	testkit.WSWrite(t, c, call(1, "bye"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	for err == nil {
		_, _, err = c.Read(ctx) // the reply may or may not come first
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4000 || ce.Reason != "bye" {
		t.Fatalf("read = %v, want close 4000 %q", err, "bye")
	}
	n := <-notifiers
	select {
	case <-n.Closed():
	case <-ctx.Done():
		t.Fatal("notifier not closed by its Disconnect")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	n.Disconnect(4002, "after the end")
	wc := n.(*wsConn)
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if !wc.ended || !wc.disconnecting {
		t.Errorf("ended %v, disconnecting %v: want both", wc.ended, wc.disconnecting)
	}
}
