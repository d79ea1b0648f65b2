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
		v, _, _ := g.do(context.Background(), "k", func() (json.RawMessage, error) {
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
	v, shared, err := g.do(context.Background(), "k", func() (json.RawMessage, error) { return json.RawMessage(`"0x2"`), nil })
	if err != nil || shared || string(v) != `"0x2"` {
		t.Fatalf("after the flight: %s shared=%v err=%v, want a fresh call", v, shared, err)
	}
}
