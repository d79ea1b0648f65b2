package emerald

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/jrpc"
)

// WebSocket close codes the subcenter disconnects with, and the gRPC
// status each becomes.
const (
	closeGoingAway = 1001
	closeSlow      = 1008 // the subcenter's slow-consumer rule
)

// streamNotifier is one NativeSubscribe stream as the subcenter sees a
// WebSocket connection (jrpc.Notifier): the subcenter queues and writes
// to it as to any connection, so the stream gets the WebSocket's
// notifications, in the same order, and its slow-consumer rule. A client
// that does not read lets gRPC's flow control stop run's sends; the
// subcenter's bounded queue for the stream then fills, it Disconnects the
// stream, and the stream ends with RESOURCE_EXHAUSTED: the head stream is
// never held up. The handler's goroutine is the stream's only writer
// (run); the notifier hands it one batch at a time, and starts no
// goroutine of its own.
type streamNotifier struct {
	ctx    context.Context // ends with the stream, or when disconnected
	cancel context.CancelCauseFunc
	out    chan []jrpc.SubscriptionNote // unbuffered: taken only while run waits
}

var _ jrpc.Notifier = (*streamNotifier)(nil)

func newStreamNotifier(ctx context.Context) *streamNotifier {
	ctx, cancel := context.WithCancelCause(ctx)
	return &streamNotifier{ctx: ctx, cancel: cancel, out: make(chan []jrpc.SubscriptionNote)}
}

// Notify implements jrpc.Notifier: params go out as one item's payload.
func (n *streamNotifier) Notify(ctx context.Context, _ string, params json.RawMessage) error {
	return n.NotifySubscriptions(ctx, []jrpc.SubscriptionNote{{Result: params}})
}

// NotifySubscriptions implements jrpc.Notifier: it waits for the writer's
// turn, hands notes over and returns; the next call waits for them to be
// sent.
func (n *streamNotifier) NotifySubscriptions(ctx context.Context, notes []jrpc.SubscriptionNote) error {
	select {
	case n.out <- slices.Clone(notes):
		return nil
	case <-n.ctx.Done():
		return jrpc.ErrConnClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TryNotifySubscriptions implements jrpc.Notifier: false while the writer
// is still sending an earlier batch.
func (n *streamNotifier) TryNotifySubscriptions(notes []jrpc.SubscriptionNote) (bool, error) {
	if n.ctx.Err() != nil {
		return false, jrpc.ErrConnClosed
	}
	// The caller reuses notes once this returns: run gets a copy.
	select {
	case n.out <- slices.Clone(notes):
		return true, nil
	default:
		return false, nil
	}
}

// Disconnect implements jrpc.Notifier: the stream ends with a status
// that says why (the first Disconnect's).
func (n *streamNotifier) Disconnect(code int, reason string) {
	c := codes.Aborted
	switch code {
	case closeSlow:
		c = codes.ResourceExhausted
	case closeGoingAway:
		c = codes.Unavailable
	}
	n.cancel(status.Error(c, reason))
}

// Closed implements jrpc.Notifier.
func (n *streamNotifier) Closed() <-chan struct{} { return n.ctx.Done() }

// AfterClose implements jrpc.Notifier.
func (n *streamNotifier) AfterClose(f func()) { context.AfterFunc(n.ctx, f) }

// run sends what the subcenter hands over, and a heartbeat item at a
// tick of heartbeat (0: none) when nothing went out since the last one (a
// stream of notifications needs none), until the stream ends, is
// disconnected, or its tenure ends (the server stops, its chain leaves).
// It returns the status the stream ends with.
func (n *streamNotifier) run(send func(*pb.NativeSubscribeReplyItem) error, heartbeat time.Duration, ten *tenure) error {
	var tick <-chan time.Time
	if heartbeat > 0 {
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		tick = t.C
	}
	busy := false // sent since the last tick: no heartbeat needed
	for {
		select {
		case notes := <-n.out:
			for _, nt := range notes {
				if err := send(&pb.NativeSubscribeReplyItem{Payload: nt.Result}); err != nil {
					n.cancel(err)
					return err
				}
			}
			busy = true
		case <-tick:
			if busy {
				busy = false
				continue
			}
			if err := send(&pb.NativeSubscribeReplyItem{Heartbeat: true}); err != nil {
				n.cancel(err)
				return err
			}
		case <-ten.table:
			if err := ten.recheck(); err != nil {
				return err
			}
		case <-ten.s.stopping:
			return errStopping
		case <-n.ctx.Done():
			return endStatus(n.ctx)
		}
	}
}

// endStatus is the status a stream whose ctx ended ends with: the
// Disconnect's, or the client's cancel.
func endStatus(ctx context.Context) error {
	err := context.Cause(ctx)
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, "stream deadline exceeded")
	}
	return status.Error(codes.Canceled, "stream cancelled")
}
