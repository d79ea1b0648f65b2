package subcenter

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/jrpc"
)

// stuckNotifier is a connection whose writer never gets its turn: every
// write waits until its ctx ends, as a jrpc connection's does behind a
// peer that does not read. It never closes.
type stuckNotifier struct{ writing chan struct{} }

func (n *stuckNotifier) Notify(context.Context, string, json.RawMessage) error {
	return errors.New("unused")
}

func (n *stuckNotifier) TryNotifySubscriptions([]jrpc.SubscriptionNote) (bool, error) {
	return false, nil
}

func (n *stuckNotifier) NotifySubscriptions(ctx context.Context, _ []jrpc.SubscriptionNote) error {
	select {
	case n.writing <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

func (n *stuckNotifier) Disconnect(int, string)  {}
func (n *stuckNotifier) Closed() <-chan struct{} { return nil }

func (n *stuckNotifier) AfterClose(func()) {}

// TestStopEndsWritersAndWatchers: when Run returns, the writer stuck on a
// connection and the watcher of a connection that never closed are gone,
// and a subscribe is refused.
func TestStopEndsWritersAndWatchers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	f := newFeed(t, 16)
	f.extend("a", 1, 1, "a")
	c := New("test", f.w, nil, Options{}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()

	n := &stuckNotifier{writing: make(chan struct{}, 1)}
	// syncing queues its notification at once; with no reply pending the
	// writer starts at once, and sticks.
	if _, err := c.Subscribe(ctxFor(n), json.RawMessage(`["syncing"]`)); err != nil {
		t.Fatal(err)
	}
	<-n.writing
	cancel()
	<-done

	_, err := c.Subscribe(ctxFor(newNotifier()), json.RawMessage(`["newHeads"]`))
	if !isRPCError(err, jrpc.CodeShuttingDown, "shutting down") {
		t.Fatalf("subscribe after stop: %v, want code %d", err, jrpc.CodeShuttingDown)
	}
}
