package jrpc

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/testkit"
)

// notingHandler notes each call as its method says: "head" answers from
// the head, "remote" from remote b after 2 attempts, "fail" fails after 3.
func notingHandler() Handler {
	return HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		n := NoteOf(ctx)
		switch req.Method {
		case "head":
			n.Answered("head")
		case "remote":
			n.Answered("remotes")
			n.Upstream("b", 2)
		case "fail":
			n.Answered("remotes")
			n.Upstream("", 3)
			return nil, &Error{Code: CodeNoRemote, Message: "all 3 remote(s) tried failed"}
		}
		return json.RawMessage(`"0x1"`), nil
	})
}

func postWith(t *testing.T, s *testServer, body string, h http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestDiagnosticHeaders checks the headers of single calls and a batch's
// summary, and that switched off there are none.
func TestDiagnosticHeaders(t *testing.T) {
	s := newTestServer(t, Options{DiagnosticHeaders: true}, notingHandler())
	tests := []struct {
		name string
		body string
		want map[string]string // "" : absent
	}{
		{"head", callOf("head"), map[string]string{sourceHeader: "head", remoteHeader: "", attemptsHeader: "0", sourcesHeader: ""}},
		{"remote", callOf("remote"), map[string]string{sourceHeader: "remotes", remoteHeader: "b", attemptsHeader: "2"}},
		{"failed", callOf("fail"), map[string]string{sourceHeader: "remotes", remoteHeader: "", attemptsHeader: "3"}},
		{"batch", "[" + strings.Join([]string{callOf("head"), callOf("remote"), callOf("head"), callOf("nothing")}, ",") + "]",
			map[string]string{sourcesHeader: "head=2,remotes=1", attemptsHeader: "2", sourceHeader: "", remoteHeader: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postWith(t, s, tt.body, nil)
			for k, want := range tt.want {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if ms, err := strconv.ParseFloat(resp.Header.Get(durationHeader), 64); err != nil || ms < 0 {
				t.Errorf("%s = %q", durationHeader, resp.Header.Get(durationHeader))
			}
		})
	}

	off := newTestServer(t, Options{}, notingHandler())
	resp := postWith(t, off, callOf("remote"), nil)
	for k := range resp.Header {
		if strings.HasPrefix(k, "X-Venn-") {
			t.Errorf("switched off, the answer has %s", k)
		}
	}
}

// TestRequestID checks that a client's usable X-Request-Id is kept, that
// others are replaced by one venn makes, that every answer (a 404 too)
// carries one, and that the handler finds it in its context.
func TestRequestID(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	h := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		mu.Lock()
		seen = append(seen, RequestID(ctx))
		mu.Unlock()
		return json.RawMessage(`1`), nil
	})
	s := newTestServer(t, Options{}, h)
	tests := []struct {
		name, give string
		kept       bool
	}{
		{"uuid", "3fa85f64-5717-4562-b3fc-2c963f66afa6", true},
		{"trace-ish", "abc:def/ghi+j=_.1", true},
		{"none", "", false},
		{"too long", strings.Repeat("a", maxRequestIDLen+1), false},
		{"unsafe", "id\"with quotes", false},
		{"space", "a b", false},
	}
	made := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := postWith(t, s, callOf("x"), http.Header{requestIDHeader: {tt.give}})
			got := resp.Header.Get(requestIDHeader)
			mu.Lock()
			inCtx := seen[len(seen)-1]
			mu.Unlock()
			if inCtx != got {
				t.Errorf("the handler saw %q, the answer says %q", inCtx, got)
			}
			if tt.kept {
				if got != tt.give {
					t.Errorf("%s = %q, want the client's %q", requestIDHeader, got, tt.give)
				}
				return
			}
			if !validRequestID(got) || got == tt.give || made[got] {
				t.Errorf("%s = %q: want a fresh id of venn's", requestIDHeader, got)
			}
			made[got] = true
		})
	}
	resp, err := s.ts.Client().Get(s.ts.URL + "/nochain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get(requestIDHeader) == "" {
		t.Errorf("a 404 (%d) has no %s", resp.StatusCode, requestIDHeader)
	}
}

// TestOnCall checks what the request log hook is given: one Call per call
// with its note, code, outcome, status and bytes, a batch's by index, a
// message invalid as a whole as one call.
func TestOnCall(t *testing.T) {
	var (
		mu    sync.Mutex
		calls []Call
	)
	s := newTestServer(t, Options{OnCall: func(c Call) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}}, notingHandler())
	take := func() []Call {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}

	single := callOf("remote")
	resp := postWith(t, s, single, http.Header{requestIDHeader: {"req-1"}})
	got := take()
	if len(got) != 1 {
		t.Fatalf("%d calls logged for one", len(got))
	}
	c := got[0]
	if c.Method != "remote" || c.Batch != -1 || c.Note.Remote != "b" || c.Note.Attempts != 2 || c.Note.Source != "remotes" ||
		c.Code != 0 || c.Outcome != "ok" || c.Status != http.StatusOK || c.Chain != testChain ||
		c.BytesIn != len(single) || c.BytesOut != int(resp.ContentLength) || c.Peer.RequestID != "req-1" || c.Start.IsZero() {
		t.Errorf("logged %+v", c)
	}

	items := []string{callOf("head"), callOf("fail")}
	postWith(t, s, "["+strings.Join(items, ",")+"]", nil)
	got = take()
	if len(got) != 2 {
		t.Fatalf("%d calls logged for a batch of 2", len(got))
	}
	for i, c := range got {
		if c.Batch != i || c.BytesIn != len(items[i]) || c.BytesOut == 0 {
			t.Errorf("item %d logged as %+v", i, c)
		}
	}
	if got[1].Code != CodeNoRemote || got[1].Outcome != "no_remote" || got[1].Note.Attempts != 3 {
		t.Errorf("the failed item logged as %+v", got[1])
	}

	postWith(t, s, "{not json", nil)
	got = take()
	if len(got) != 1 || got[0].Code != CodeParseError || got[0].Method != "" || got[0].BytesIn != len("{not json") {
		t.Errorf("an invalid message logged as %+v", got)
	}

	// Over WebSocket the hook runs once the answer is written: wait for it.
	conn := s.dial(t)
	testkit.WSWrite(t, conn, single)
	testkit.WSRead(t, conn)
	testkit.WaitFor(t, 5*time.Second, "the WebSocket call's hook", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) > 0
	})
	got = take()
	if len(got) != 1 || got[0].Status != 0 || got[0].Peer.Transport != TransportWS || got[0].Peer.RequestID == "" || got[0].Note.Remote != "b" {
		t.Errorf("a WebSocket call logged as %+v", got)
	}
}
