package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/testkit"
)

// testChain is the chain every test server serves.
const testChain = "test"

// vennError is a venn-range error as other packages build them.
type vennError struct {
	code int
	msg  string
}

func (e vennError) Error() string  { return e.msg }
func (e vennError) ErrorCode() int { return e.code }

// dataError is a vennError whose wire error carries data.
type dataError struct {
	vennError
	data string
}

func (e dataError) ErrorData() json.RawMessage { return json.RawMessage(e.data) }

// echoHandler answers the methods of the JSON-RPC 2.0 spec examples plus a
// few that exercise error mapping.
func echoHandler() Handler {
	return HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		switch req.Method {
		case "test_echo":
			return req.Params, nil
		case "subtract":
			var pos []int
			if json.Unmarshal(req.Params, &pos) == nil && len(pos) == 2 {
				return json.Marshal(pos[0] - pos[1])
			}
			var named struct{ Minuend, Subtrahend int }
			if err := json.Unmarshal(req.Params, &named); err != nil {
				return nil, &Error{Code: CodeInvalidParams, Message: "Invalid params"}
			}
			return json.Marshal(named.Minuend - named.Subtrahend)
		case "sum", "notify_sum":
			var xs []int
			if err := json.Unmarshal(req.Params, &xs); err != nil {
				return nil, &Error{Code: CodeInvalidParams, Message: "Invalid params"}
			}
			total := 0
			for _, x := range xs {
				total += x
			}
			return json.Marshal(total)
		case "update", "notify_hello":
			return nil, nil
		case "get_data":
			return json.RawMessage(`["hello", 5]`), nil
		case "test_panic":
			panic("boom")
		case "test_fail":
			return nil, errors.New("dial tcp 10.1.2.3:8545: connection refused")
		case "test_timeout":
			return nil, fmt.Errorf("call remote: %w", context.DeadlineExceeded)
		case "test_noremote":
			return nil, fmt.Errorf("route: %w", vennError{CodeNoRemote, "no remote can serve eth_call"})
		case "test_badcode":
			return nil, vennError{-1, "not a venn code"}
		case "test_upstream":
			return nil, fmt.Errorf("remote alpha: %w", &Error{Code: 3, Message: "execution reverted",
				Data: json.RawMessage(`"0x08c379a0"`)})
		case "test_peer":
			p, ok := PeerFromContext(ctx)
			if !ok {
				return nil, errors.New("no peer")
			}
			return json.Marshal(p.Transport + " " + p.Header.Get("X-Test"))
		default:
			return nil, &Error{Code: CodeMethodNotFound, Message: "Method not found"}
		}
	})
}

// testServer is a Server behind an httptest.Server, both stopped at cleanup.
type testServer struct {
	*Server
	ts *httptest.Server
}

func newTestServer(t testing.TB, opts Options, h Handler) *testServer {
	t.Helper()
	return newTestServerOn(t, opts, h, nil)
}

// newTestServerOn is newTestServer whose listener is wrap's (when not
// nil) around the test server's own.
func newTestServerOn(t testing.TB, opts Options, h Handler, wrap func(net.Listener) net.Listener) *testServer {
	t.Helper()
	s := NewServer(opts)
	s.Handle(testChain, h)
	ts := httptest.NewUnstartedServer(s.Handler())
	if wrap != nil {
		ts.Listener = wrap(ts.Listener)
	}
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ts.Close()
	})
	return &testServer{Server: s, ts: ts}
}

func (s *testServer) url() string { return s.ts.URL + "/" + testChain }

func (s *testServer) wsURL() string { return "ws" + strings.TrimPrefix(s.url(), "http") }

// post sends body as a JSON-RPC request and returns status and body.
func (s *testServer) post(t *testing.T, body string) (int, string) {
	t.Helper()
	status, got, err := s.tryPost(body)
	if err != nil {
		t.Fatal(err)
	}
	return status, got
}

// tryPost is post for goroutines other than the test's, which must not
// call t.Fatal.
func (s *testServer) tryPost(body string) (int, string, error) {
	resp, err := s.ts.Client().Post(s.url(), "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("read response: %w", err)
	}
	return resp.StatusCode, string(b), nil
}

// dial opens a WebSocket to the test chain, closed at cleanup.
func (s *testServer) dial(t *testing.T) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, s.wsURL(), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(-1)
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, what, cond)
}

func callOf(method string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":[]}`
}

// aliceSecret is the one key pathKeyGate lets in.
const aliceSecret = "alice-0123456789abcdef"

// pathKeyGate is a Gate that takes keys in the path (/CHAIN/KEY) and lets
// in only aliceSecret there, as package edge does with one key.
type pathKeyGate struct{}

func (pathKeyGate) KeysInPath() bool { return true }

func (pathKeyGate) Admit(_ *http.Request, a Admission) (Caller, *Refusal) {
	if a.PathKey != aliceSecret {
		return nil, &Refusal{Status: http.StatusUnauthorized, Err: &Error{Code: CodeUnauthorized, Message: "unauthorized"}}
	}
	return nil, nil
}
