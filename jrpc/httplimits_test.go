package jrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHTTPInFlightLimit(t *testing.T) {
	const limit = 2
	var active atomic.Int32
	gate := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		active.Add(1)
		defer active.Add(-1)
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return req.Params, nil
	})
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Options{Registerer: reg, Limits: Limits{MaxHTTPInFlight: limit}}, h)

	answers := make(chan string, limit)
	for i := range limit {
		go func() {
			_, body, err := s.tryPost(call(i, "m"))
			if err != nil {
				t.Error(err)
			}
			answers <- body
		}()
	}
	waitFor(t, "the slots to fill", func() bool { return active.Load() == limit })

	status, body := s.post(t, call(9, "m"))
	if status != http.StatusServiceUnavailable {
		t.Errorf("status over max_http_in_flight = %d, want 503", status)
	}
	e := decodeErrorBody(t, []byte(body))
	if e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "max_http_in_flight (2)") {
		t.Errorf("error = %d %q, want %d naming max_http_in_flight (2)", e.Code, e.Message, CodeLimitExceeded)
	}
	// Load balancers and clients back off by Retry-After.
	resp, err := http.Post(s.url(), "application/json", strings.NewReader(call(10, "m")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("refusal: status %d, Retry-After %q; want 503 with a Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	labels := map[string]string{"chain": testChain, "limit": "max_http_in_flight"}
	if got := metricValue(t, reg, "venn_limit_rejections_total", labels); got != 2 {
		t.Errorf("venn_limit_rejections_total%v = %v, want 2", labels, got)
	}

	// The calls in flight are answered, and their slots come back.
	close(gate)
	for range limit {
		if got := <-answers; !strings.Contains(got, `"result":[`) {
			t.Errorf("call in flight: got %s", got)
		}
	}
	if status, body := s.post(t, call(3, "m")); status != http.StatusOK || body != `{"jsonrpc":"2.0","id":3,"result":[3]}` {
		t.Errorf("after the slots freed: %d %s", status, body)
	}
}

// rawPost opens a TCP connection to s and sends the headers of a POST that
// declares contentLength bytes; the caller sends the body.
func rawPost(t *testing.T, s *testServer, contentLength int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", s.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := "POST /" + testChain + " HTTP/1.1\r\nHost: venn\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(contentLength) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestHTTPReadTimeoutCutsSlowBody(t *testing.T) {
	const timeout = 200 * time.Millisecond
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Options{Registerer: reg, Limits: Limits{HTTPReadTimeout: timeout}}, echoHandler())

	// A slowloris client: a large declared body, one byte at a time, each
	// well inside the timeout. Only a deadline on the whole body stops it.
	// The server's deadline starts once it has the request's headers, so
	// the wait is timed from before they are sent.
	start := time.Now()
	conn := rawPost(t, s, 1<<20)
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(timeout / 10)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return // the server closed the connection
			}
		}
	}()
	defer func() { close(stop); <-trickled }()

	_ = conn.SetReadDeadline(start.Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < timeout || waited > 5*time.Second {
		t.Errorf("answered after %v, want about http_read_timeout (%v)", waited, timeout)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status = %d, want 408", resp.StatusCode)
	}
	if !resp.Close {
		t.Error("connection not closed after a body timeout")
	}
	e := decodeErrorBody(t, body)
	if e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "http_read_timeout (200ms)") {
		t.Errorf("error = %d %q, want %d naming http_read_timeout", e.Code, e.Message, CodeLimitExceeded)
	}
	labels := map[string]string{"chain": testChain, "limit": "http_read_timeout"}
	if got := metricValue(t, reg, "venn_limit_rejections_total", labels); got != 1 {
		t.Errorf("venn_limit_rejections_total%v = %v, want 1", labels, got)
	}
	// The slot the slow body held is free again.
	waitFor(t, "the slot to be released", func() bool { return s.httpInFlight.Load() == 0 })
}

// A call may run far longer than http_read_timeout: the deadline is on the
// body, and must not cancel the call once the body is in.
func TestHTTPReadTimeoutSparesSlowCalls(t *testing.T) {
	const timeout = 50 * time.Millisecond
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		select {
		case <-time.After(5 * timeout):
			return json.RawMessage(`"slow but fine"`), nil
		case <-ctx.Done():
			return nil, errors.New("call canceled")
		}
	})
	s := newTestServer(t, Options{Limits: Limits{HTTPReadTimeout: timeout}}, h)
	// Twice on one keep-alive connection: the second request gets its own
	// deadline too.
	for i := range 2 {
		status, body := s.post(t, call(i, "m"))
		if want := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":"slow but fine"}`; status != 200 || body != want {
			t.Errorf("call %d: %d %s, want 200 %s", i, status, body, want)
		}
	}
}

// firstReadRecorder records the room readLimited offers its first Read,
// which is its first allocation.
type firstReadRecorder struct {
	r     io.Reader
	first int
	reads int
}

func (f *firstReadRecorder) Read(p []byte) (int, error) {
	if f.reads == 0 {
		f.first = len(p)
	}
	f.reads++
	return f.r.Read(p)
}

func TestReadLimitedFirstBuffer(t *testing.T) {
	const limit = 5 << 20
	small := `{"jsonrpc":"2.0","id":1,"method":"m"}`
	tests := []struct {
		name      string
		give      string
		sizeHint  int64
		wantFirst int
	}{
		// A client declaring the whole limit and sending a few bytes gets a
		// small buffer, not 5 MiB.
		{name: "declared at limit", give: small, sizeHint: limit, wantFirst: maxFirstReadBuf},
		{name: "declared exactly", give: small, sizeHint: int64(len(small)), wantFirst: len(small) + 1},
		{name: "unknown size", give: small, sizeHint: -1, wantFirst: minReadBuf},
		{name: "grows past the first buffer", give: strings.Repeat("x", 3*maxFirstReadBuf), sizeHint: limit, wantFirst: maxFirstReadBuf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &firstReadRecorder{r: strings.NewReader(tt.give)}
			got, err := readLimited(rec, tt.sizeHint, limit)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.give {
				t.Errorf("read %d bytes, want %d", len(got), len(tt.give))
			}
			if rec.first != tt.wantFirst {
				t.Errorf("first buffer = %d bytes, want %d", rec.first, tt.wantFirst)
			}
		})
	}
}

// A client that posts and never reads must not hold its max_http_in_flight
// slot (and the answer's buffer) for ever: http_write_timeout cuts it off.
func TestHTTPWriteTimeoutFreesSlowReader(t *testing.T) {
	const timeout = 300 * time.Millisecond
	// Far more than loopback socket buffers hold (a few MiB), so the write
	// blocks on a client that does not read.
	big := json.RawMessage(`"` + strings.Repeat("x", 16<<20) + `"`)
	served := make(chan struct{}, 1)
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		if req.Method == "big" {
			served <- struct{}{}
			return big, nil
		}
		return req.Params, nil
	})
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Options{Registerer: reg, Limits: Limits{MaxHTTPInFlight: 1, HTTPWriteTimeout: timeout}}, h)

	req := call(1, "big")
	conn := rawPost(t, s, len(req))
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetReadBuffer(64 << 10)
	}
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		t.Fatal("the large call never reached the handler")
	}
	start := time.Now()

	// The client reads nothing; within the timeout its slot comes back.
	waitFor(t, "the slow reader's slot to be released", func() bool { return s.httpInFlight.Load() == 0 })
	if held := time.Since(start); held < timeout/2 {
		t.Errorf("slot released after %v: the answer did not block, so the test proves nothing", held)
	}
	if status, body := s.post(t, call(2, "m")); status != http.StatusOK || body != `{"jsonrpc":"2.0","id":2,"result":[2]}` {
		t.Errorf("next call with max_http_in_flight 1: %d %s, want 200", status, body)
	}
	labels := map[string]string{"chain": testChain, "limit": "http_write_timeout"}
	if got := metricValue(t, reg, "venn_limit_rejections_total", labels); got != 1 {
		t.Errorf("venn_limit_rejections_total%v = %v, want 1", labels, got)
	}

	// The slow reader's answer was cut off, not delivered late.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, _ := io.Copy(io.Discard, conn)
	if got >= int64(len(big)) {
		t.Errorf("slow reader received %d bytes, want the answer (%d bytes) cut short", got, len(big))
	}
}
