package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// A follower that gives up leaves at once; the leader's call goes on and
// later callers start a fresh call.
func TestFlightsFollowerLeaves(t *testing.T) {
	var g flights
	release := make(chan struct{})
	leader := make(chan json.RawMessage)
	go func() {
		v, _, _ := g.do(context.Background(), "k", func(context.Context) (json.RawMessage, error) {
			<-release
			return json.RawMessage(`"0x1"`), nil
		})
		leader <- v
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		n := len(g.m)
		g.mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, shared, err := g.do(ctx, "k", nil); !errors.Is(err, context.DeadlineExceeded) || shared {
		t.Fatalf("follower: shared=%v err=%v, want to leave on its deadline", shared, err)
	}
	close(release)
	if v := <-leader; string(v) != `"0x1"` {
		t.Fatalf("leader got %s", v)
	}
	v, shared, err := g.do(context.Background(), "k", func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"0x2"`), nil })
	if err != nil || shared || string(v) != `"0x2"` {
		t.Fatalf("after the flight: %s shared=%v err=%v, want a fresh call", v, shared, err)
	}
}

// When every caller has left, the shared call is cancelled: a client that
// hangs up stops costing upstream calls.
func TestFlightsCancelledWhenAllLeave(t *testing.T) {
	var g flights
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var fnErr error
	go func() {
		<-started
		cancel() // the only caller hangs up mid-call
	}()
	_, _, err := g.do(ctx, "k", func(fctx context.Context) (json.RawMessage, error) {
		close(started)
		select {
		case <-fctx.Done():
			fnErr = fctx.Err()
			return nil, fctx.Err()
		case <-time.After(5 * time.Second):
			return json.RawMessage(`"0x1"`), nil
		}
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(fnErr, context.Canceled) {
		t.Fatalf("caller err %v, shared call err %v: want both cancelled", err, fnErr)
	}
	g.mu.Lock()
	n := len(g.m)
	g.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d flights still listed after the last caller left", n)
	}
}
