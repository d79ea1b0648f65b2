package jrpc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/internal/testkit"
)

// A removed chain's WebSocket clients read a close frame with the reason;
// its HTTP call in flight still answers; new requests get 404; the other
// chain is untouched.
func TestRemoveChain(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	slow := HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		if req.Method == "slow" {
			close(started)
			<-release
		}
		return json.RawMessage(`"done"`), nil
	})
	s := newTestServer(t, Options{}, slow)
	s.Handle("other", echoHandler())
	ws := s.dial(t)
	other, _, err := websocket.Dial(context.Background(), s.ts.URL+"/other", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.CloseNow()
	waitFor(t, "both connections tracked", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 2
	})

	inFlight := make(chan string, 1)
	go func() {
		_, body, err := s.tryPost(call(1, "slow"))
		if err != nil {
			body = err.Error()
		}
		inFlight <- body
	}()
	<-started

	const reason = "chain test removed by a config reload"
	if n, ok := s.Remove(testChain, reason); !ok || n != 1 {
		t.Fatalf("Remove = %d, %v; want 1, true", n, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err = ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || ce.Reason != reason {
		t.Errorf("read after Remove = %v, want close %d %q", err, websocket.StatusGoingAway, reason)
	}
	close(release)
	if got := <-inFlight; !strings.Contains(got, `"result":"done"`) {
		t.Errorf("call in flight answered %s", got)
	}
	if status, _ := s.post(t, call(2, "fast")); status != http.StatusNotFound {
		t.Errorf("POST after Remove: %d, want 404", status)
	}
	testkit.WSWrite(t, other, `{"jsonrpc":"2.0","id":3,"method":"test_echo","params":[1]}`)
	if got, want := testkit.WSRead(t, other), `{"jsonrpc":"2.0","id":3,"result":[1]}`; got != want {
		t.Errorf("other chain: %s, want %s", got, want)
	}
	if _, ok := s.Remove(testChain, reason); ok {
		t.Error("second Remove found the chain")
	}
	s.Handle(testChain, echoHandler()) // the name may come back
}

// SetLimits applies to the next request.
func TestSetLimits(t *testing.T) {
	s := newTestServer(t, Options{}, echoHandler())
	batch := "[" + call(1, "get_data") + "," + call(2, "get_data") + "]"
	if _, got := s.post(t, batch); strings.Contains(got, "error") {
		t.Fatalf("batch of 2 refused before: %s", got)
	}
	s.SetLimits(Limits{MaxBatchItems: 1})
	if _, got := s.post(t, batch); !strings.Contains(got, "exceeds max_batch_items (1)") {
		t.Errorf("batch of 2 with max_batch_items 1: %s", got)
	}
}

// A removed chain's series are deleted; the other chain's stay.
func TestRemoveChainDropsSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newTestServer(t, Options{Registerer: reg}, echoHandler())
	s.Handle("other", echoHandler())
	s.post(t, call(1, "test_echo"))
	resp, err := s.ts.Client().Post(s.ts.URL+"/other", "application/json", strings.NewReader(call(1, "test_echo")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	count := func(chain string) int { return testkit.Series(t, reg, map[string]string{"chain": chain}) }
	if count(testChain) == 0 || count("other") == 0 {
		t.Fatalf("series before: %d of %s, %d of other", count(testChain), testChain, count("other"))
	}
	s.Remove(testChain, "removed")
	if n := count(testChain); n != 0 {
		t.Errorf("%d series of the removed chain left", n)
	}
	if count("other") == 0 {
		t.Error("the other chain's series went too")
	}
}

// A call in flight when its chain is removed, counted after, writes no
// series of the removed chain again.
func TestRemovedChainCallInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	started, release := make(chan struct{}), make(chan struct{})
	s := newTestServer(t, Options{Registerer: reg}, HandlerFunc(func(ctx context.Context, req *Request) (json.RawMessage, error) {
		close(started)
		<-release
		return json.RawMessage(`"done"`), nil
	}))
	done := make(chan error, 1)
	go func() {
		_, _, err := s.tryPost(call(1, "slow"))
		done <- err
	}()
	<-started
	s.Remove(testChain, "removed")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "chain" && l.GetValue() == testChain {
					t.Errorf("%s of the removed chain written again: %v", mf.GetName(), m)
				}
			}
		}
	}
}
