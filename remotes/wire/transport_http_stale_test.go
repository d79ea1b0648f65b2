package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/tracing"
)

// staleServer is a remote on 127.0.0.1 that closes a connection without a
// reply once it has read a call that drop picks, as a remote whose idle
// timeout ran out while that call was on its way does. Closing after the
// read makes the race certain: the client's write succeeds and its read
// meets the close. With warm set, the first warm calls are answered only
// once all of them have arrived, so that each has its connection and the
// client keeps warm idle ones.
type staleServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	drop func(conn, i int) bool // the i-th call on connection conn
	warm int
	// warmed is closed once warm calls have arrived.
	warmed chan struct{}

	mu    sync.Mutex
	conns []net.Conn
	calls []staleCall
}

// staleCall is a call as the remote read it.
type staleCall struct {
	conn   int
	method string
	header http.Header
}

// newStaleServer starts a remote whose first connection loses the race:
// it answers the first call on it and drops the second; every later
// connection answers every call.
func newStaleServer(t *testing.T) *staleServer {
	return startStaleServer(t, 0, func(conn, i int) bool { return conn == 0 && i == 1 })
}

func startStaleServer(t *testing.T, warm int, drop func(conn, i int) bool) *staleServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &staleServer{ln: ln, drop: drop, warm: warm, warmed: make(chan struct{})}
	if warm == 0 {
		close(s.warmed)
	}
	s.wg.Add(1)
	go s.accept()
	return s
}

func (s *staleServer) url() string { return "http://" + s.ln.Addr().String() }

// stop closes the listener and every connection, and waits for the
// server's goroutines.
func (s *staleServer) stop() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *staleServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		n := len(s.conns) - 1
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c, n)
	}
}

func (s *staleServer) serve(c net.Conn, conn int) {
	defer s.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; ; i++ {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		var call tpRequest
		err = json.NewDecoder(r.Body).Decode(&call)
		io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.calls = append(s.calls, staleCall{conn: conn, method: call.Method, header: r.Header})
		n := len(s.calls)
		s.mu.Unlock()
		if n == s.warm {
			close(s.warmed)
		}
		if n <= s.warm {
			<-s.warmed // stop closes c, but the client waits for this reply
		}
		if s.drop(conn, i) {
			return // the idle timeout: read, never answered
		}
		body := `{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":"0x1"}`
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+
			strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
			return
		}
	}
}

// seen is the calls the remote read, in order, and the connections it
// accepted.
func (s *staleServer) seen() ([]staleCall, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]staleCall(nil), s.calls...), len(s.conns)
}

// TestHTTPTransportStaleConnection: a call written on a keep-alive
// connection that the remote closes as the call arrives is sent again on
// a new connection when it is a read, and answered there, so the race
// costs the pool no failure; a write (or a stateful call) is not, since
// the remote may have acted on it, and fails with ErrTransport. The
// transport's replay mark never reaches the remote, and a remote's
// configured headers cannot make a write replayable.
func TestHTTPTransportStaleConnection(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tracing.FromTracer(tp.Tracer("test"), true)

	tests := []struct {
		name       string
		give       string // method
		headers    http.Header
		traced     bool
		wantResend bool
	}{
		{name: "read", give: "eth_getBalance", wantResend: true},
		{name: "unlisted read", give: "foo_bar", wantResend: true},
		{name: "traced read", give: "eth_call", traced: true, wantResend: true},
		{name: "raw transaction", give: "eth_sendRawTransaction"},
		{name: "transaction", give: "eth_sendTransaction"},
		{name: "traced write", give: "eth_sendRawTransaction", traced: true},
		{name: "unlisted write", give: "eth_sendUserOperation"},
		{name: "stateful", give: "eth_getFilterChanges"},
		{
			name:    "write with a configured key",
			give:    "eth_sendRawTransaction",
			headers: http.Header{"Idempotency-Key": {"k"}, "X-Idempotency-Key": {"k"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpNoLeaks(t)
			srv := newStaleServer(t)
			defer srv.stop()
			tr, err := New(Options{Name: "alpha", URL: srv.url(), Headers: tt.headers, Tracer: tracer})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()

			ctx := context.Background()
			if tt.traced {
				var sp trace.Span
				ctx, sp = tracer.StartRoot(ctx, "call", trace.SpanKindServer, nil)
				defer sp.End()
			}
			params := json.RawMessage(`["0x00"]`)
			if _, _, err := tr.Call(ctx, tt.give, params); err != nil {
				t.Fatalf("first call: %v", err)
			}
			res, _, err := tr.Call(ctx, tt.give, params)

			calls, conns := srv.seen()
			wantCalls, wantConns := 2, 1
			if tt.wantResend {
				wantCalls, wantConns = 3, 2
				if err != nil || string(res) != `"0x1"` {
					t.Errorf("call on the closed connection = %s, %v; want it answered on a new one", res, err)
				}
			} else if !errors.Is(err, ErrTransport) {
				t.Errorf("call on the closed connection = %s, %v; want ErrTransport", res, err)
			}
			if len(calls) != wantCalls || conns != wantConns {
				t.Errorf("remote read %d calls on %d connections, want %d on %d", len(calls), conns, wantCalls, wantConns)
			}
			for i, c := range calls {
				if c.method != tt.give {
					t.Errorf("call %d: method %q, want %q", i, c.method, tt.give)
				}
				for _, k := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
					if v, ok := c.header[k]; ok {
						t.Errorf("call %d sent %s %q", i, k, v)
					}
				}
				if got := c.header.Get("Traceparent") != ""; got != tt.traced {
					t.Errorf("call %d: traceparent sent %v, want %v", i, got, tt.traced)
				}
			}
		})
	}
}

// TestReplayHeadersNeverForwarded: a client cannot mark a write as safe
// to send twice.
func TestReplayHeadersNeverForwarded(t *testing.T) {
	for _, k := range []string{"Idempotency-Key", "x-idempotency-key"} {
		if !NeverForwarded(k) {
			t.Errorf("%s: NeverForwarded false", k)
		}
	}
	if f := NewForwarding([]string{"Idempotency-Key", "X-Idempotency-Key"}, false); len(f.headers) != 0 {
		t.Errorf("forwarded headers %q, want none", f.headers)
	}
}

// TestHTTPTransportResendsOnce: a remote that closes every connection a call
// arrives on gets a read twice, not once per idle connection the client
// keeps (net/http would go on until a new connection failed), and the call
// fails as a reset.
func TestHTTPTransportResendsOnce(t *testing.T) {
	tpNoLeaks(t)
	const warm = 4
	srv := startStaleServer(t, warm, func(conn, i int) bool { return conn >= warm || i > 0 })
	defer srv.stop()
	tr, err := New(Options{Name: "alpha", URL: srv.url()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	var g sync.WaitGroup
	for range warm {
		g.Go(func() {
			if _, _, err := tr.Call(context.Background(), "eth_chainId", nil); err != nil {
				t.Errorf("warm-up call: %v", err)
			}
		})
	}
	g.Wait()
	if _, conns := srv.seen(); conns != warm {
		t.Fatalf("warm-up took %d connections, want %d", conns, warm)
	}

	_, _, err = tr.Call(context.Background(), "eth_getBalance", json.RawMessage(`["0x00","latest"]`))
	if !errors.Is(err, ErrTransport) || FailureKind(err) != FailReset {
		t.Errorf("call = %v (kind %q), want ErrTransport, %q", err, FailureKind(err), FailReset)
	}
	calls, _ := srv.seen()
	if got := len(calls) - warm; got != 1+httpMaxResends {
		t.Errorf("the remote read the call %d times, want %d", got, 1+httpMaxResends)
	}
}
