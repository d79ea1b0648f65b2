package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHTTPStatusAndHeaders(t *testing.T) {
	s := newTestServer(t, Options{}, echoHandler())
	const call = `{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[1]}`
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		wantStatus  int
		wantCode    int // 0: a result
		wantBody    string
		wantMessage string // substring of the error message
	}{
		{name: "post json", method: "POST", path: "/test", contentType: "application/json", body: call,
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":[1]}`},
		{name: "content type params", method: "POST", path: "/test", contentType: "Application/JSON; charset=utf-8", body: call,
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":[1]}`},
		{name: "no content type", method: "POST", path: "/test", body: call,
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":[1]}`},
		{name: "form content type", method: "POST", path: "/test", contentType: "application/x-www-form-urlencoded", body: call,
			wantStatus: 415, wantCode: CodeInvalidRequest, wantMessage: "application/json"},
		{name: "text content type", method: "POST", path: "/test", contentType: "text/plain", body: call,
			wantStatus: 415, wantCode: CodeInvalidRequest, wantMessage: "application/json"},
		{name: "get without upgrade", method: "GET", path: "/test",
			wantStatus: 405, wantCode: CodeInvalidRequest, wantMessage: "GET not allowed"},
		{name: "put", method: "PUT", path: "/test", body: call,
			wantStatus: 405, wantCode: CodeInvalidRequest, wantMessage: "PUT not allowed"},
		{name: "unknown chain", method: "POST", path: "/nochain", body: call,
			wantStatus: 404, wantCode: CodeUnknownChain, wantMessage: `"/nochain"`},
		{name: "nested path", method: "POST", path: "/test/extra", body: call,
			wantStatus: 404, wantCode: CodeUnknownChain, wantMessage: `"/test/extra"`},
		{name: "root serves the only chain", method: "POST", path: "/", body: call,
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":[1]}`},
		{name: "parse error is 200", method: "POST", path: "/test", body: `{`,
			wantStatus: 200, wantCode: CodeParseError},
		{name: "notification only", method: "POST", path: "/test", body: `{"jsonrpc":"2.0","method":"update"}`,
			wantStatus: 200, wantBody: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, s.ts.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			resp, err := s.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantCode == 0 {
				if string(body) != tt.wantBody {
					t.Errorf("body = %s, want %s", body, tt.wantBody)
				}
				if tt.wantBody != "" && resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("Content-Type = %q", resp.Header.Get("Content-Type"))
				}
				return
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			e := decodeErrorBody(t, body)
			if e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantMessage) {
				t.Errorf("error = %d %q, want %d containing %q", e.Code, e.Message, tt.wantCode, tt.wantMessage)
			}
		})
	}
}

// decodeErrorBody checks body is one JSON-RPC error object with id null.
func decodeErrorBody(t *testing.T, body []byte) Error {
	t.Helper()
	var resp struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *Error          `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	if resp.Version != "2.0" || string(resp.ID) != "null" || resp.Error == nil {
		t.Fatalf("answer %s is not an error object with id null", body)
	}
	return *resp.Error
}

// chunkedReader hides its length, so the client sends it chunked, without a
// Content-Length the server could check first.
type chunkedReader struct{ io.Reader }

func TestBodyLimit(t *testing.T) {
	const limit = 1024
	s := newTestServer(t, Options{Limits: Limits{MaxBodyBytes: limit}}, echoHandler())
	// A call of exactly n bytes, padded inside params.
	callOf := func(n int) string {
		const head, tail = `{"jsonrpc":"2.0","id":1,"method":"test_echo","params":["`, `"]}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	tests := []struct {
		name       string
		give       io.Reader
		wantStatus int
	}{
		{name: "at limit", give: strings.NewReader(callOf(limit)), wantStatus: 200},
		{name: "over limit", give: strings.NewReader(callOf(limit + 1)), wantStatus: 413},
		{name: "far over limit", give: strings.NewReader(callOf(100 * limit)), wantStatus: 413},
		{name: "chunked at limit", give: chunkedReader{strings.NewReader(callOf(limit))}, wantStatus: 200},
		{name: "chunked over limit", give: chunkedReader{strings.NewReader(callOf(limit + 1))}, wantStatus: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.ts.Client().Post(s.url(), "application/json", tt.give)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == 200 {
				if !strings.HasPrefix(string(body), `{"jsonrpc":"2.0","id":1,"result":["xxx`) {
					t.Errorf("body = %.80s...", body)
				}
				return
			}
			e := decodeErrorBody(t, body)
			if e.Code != CodeLimitExceeded || !strings.Contains(e.Message, "max_body_bytes") {
				t.Errorf("error = %d %q, want %d naming max_body_bytes", e.Code, e.Message, CodeLimitExceeded)
			}
		})
	}
}

func TestBatchLimit(t *testing.T) {
	const limit = 5
	s := newTestServer(t, Options{Limits: Limits{MaxBatchItems: limit}}, echoHandler())
	batchOf := func(n int) string {
		items := make([]string, n)
		for i := range items {
			items[i] = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"test_echo","params":[]}`
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	tests := []struct {
		name      string
		give      string
		wantItems int // answers in the batch; 0: one error object
		wantMsg   string
	}{
		{name: "at limit", give: batchOf(limit), wantItems: limit},
		{name: "over limit", give: batchOf(limit + 1), wantMsg: "batch of 6 items exceeds max_batch_items (5)"},
		{name: "far over limit", give: batchOf(40), wantMsg: "batch of 40 items exceeds max_batch_items (5)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := s.post(t, tt.give)
			if status != 200 {
				t.Fatalf("status = %d", status)
			}
			if tt.wantItems > 0 {
				var answers []json.RawMessage
				if err := json.Unmarshal([]byte(body), &answers); err != nil || len(answers) != tt.wantItems {
					t.Fatalf("got %s, want %d answers", body, tt.wantItems)
				}
				return
			}
			e := decodeErrorBody(t, []byte(body))
			if e.Code != CodeLimitExceeded || e.Message != tt.wantMsg {
				t.Errorf("error = %d %q, want %d %q", e.Code, e.Message, CodeLimitExceeded, tt.wantMsg)
			}
		})
	}
}

func TestBatchConcurrency(t *testing.T) {
	const limit, items = 3, 12
	var active, peak atomic.Int32
	gate := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return req.ID, nil
	})
	s := newTestServer(t, Options{Limits: Limits{BatchConcurrency: limit}}, h)

	parts := make([]string, items)
	want := make([]string, items)
	for i := range parts {
		parts[i] = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"m"}`
		want[i] = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":` + strconv.Itoa(i) + `}`
	}
	done := make(chan string, 1)
	go func() {
		_, body, err := s.tryPost("[" + strings.Join(parts, ",") + "]")
		if err != nil {
			t.Error(err)
		}
		done <- body
	}()
	waitFor(t, "the batch to fill its workers", func() bool { return active.Load() == limit })
	close(gate)
	body := <-done
	if p := peak.Load(); p != limit {
		t.Errorf("peak concurrency = %d, want %d", p, limit)
	}
	if wantBody := "[" + strings.Join(want, ",") + "]"; body != wantBody {
		t.Errorf("answers out of order:\n got %s\nwant %s", body, wantBody)
	}
}

func TestHTTPClientDisconnectCancelsCall(t *testing.T) {
	started := make(chan struct{})
	canceled := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		close(canceled)
		return nil, ctx.Err()
	})
	s := newTestServer(t, Options{}, h)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", s.url(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := s.ts.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not canceled when the client left")
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error = %v, want canceled", err)
	}
}

func TestPeerInContext(t *testing.T) {
	s := newTestServer(t, Options{}, echoHandler())
	req, err := http.NewRequest("POST", s.url(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"test_peer"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test", "hello")
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := `{"jsonrpc":"2.0","id":1,"result":"http hello"}`; string(body) != want {
		t.Errorf("got %s, want %s", body, want)
	}
	if _, ok := NotifierFromContext(context.Background()); ok {
		t.Error("NotifierFromContext found a notifier outside a call")
	}
}

func TestShutdownDrainsHTTPCalls(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		if req.Method == "slow" {
			started <- struct{}{}
			<-release
		}
		return json.RawMessage(`"done"`), nil
	})
	s := newTestServer(t, Options{}, h)

	slow := make(chan string, 1)
	go func() {
		_, body, err := s.tryPost(`{"jsonrpc":"2.0","id":1,"method":"slow"}`)
		if err != nil {
			t.Error(err)
		}
		slow <- body
	}()
	<-started

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	waitFor(t, "shutdown to begin", s.closing.Load)

	// New calls are refused, with their ids, and HTTP 503 so that load
	// balancers and clients try elsewhere.
	status, body := s.post(t, `[{"jsonrpc":"2.0","id":2,"method":"fast"},{"jsonrpc":"2.0","method":"fast"}]`)
	if want := `[{"jsonrpc":"2.0","id":2,"error":{"code":-32054,"message":"server is shutting down"}}]`; status != http.StatusServiceUnavailable || body != want {
		t.Errorf("call during shutdown: got %d %s, want 503 %s", status, body, want)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a call in flight", err)
	default:
	}
	close(release)
	if got := <-slow; got != `{"jsonrpc":"2.0","id":1,"result":"done"}` {
		t.Errorf("call in flight: got %s", got)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestShutdownGivesUpAtDeadline(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		close(started)
		<-release
		return nil, nil
	})
	s := newTestServer(t, Options{}, h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, _, err := s.tryPost(`{"jsonrpc":"2.0","id":1,"method":"slow"}`); err != nil {
			t.Error(err)
		}
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want deadline exceeded", err)
	}
	close(release)
	<-done
}

func TestHandlePanicsOnWiringBugs(t *testing.T) {
	tests := []struct {
		name  string
		chain string
		h     Handler
	}{
		{name: "empty name", chain: "", h: echoHandler()},
		{name: "slash", chain: "a/b", h: echoHandler()},
		{name: "nil handler", chain: "x", h: nil},
		{name: "twice", chain: testChain, h: echoHandler()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(Options{})
			s.Handle(testChain, echoHandler())
			defer func() {
				if recover() == nil {
					t.Error("Handle did not panic")
				}
			}()
			s.Handle(tt.chain, tt.h)
		})
	}
}
