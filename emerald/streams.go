package emerald

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	rstatus "github.com/venn-gateway/venn/remotes/status"
)

// StreamChain is one served chain as the streams read it: its router (for
// eth_subscribe), the head window every replica serves newHeads from, and
// its remotes' status (names, heads, block availability; never a URL).
type StreamChain interface {
	Caller
	Window() *headstore.Window
	Remotes() []rstatus.Remote
}

// Streams serves the emerald streams over each chain's shared head feed
// and subcenter: SubscribeHead, NativeSubscribe, SubscribeStatus,
// SubscribeChainStatus and SubscribeNodeStatus. The server embeds it and
// adds the calls (NativeCall, Describe); alone, it answers them
// UNIMPLEMENTED.
type Streams struct {
	pb.UnimplementedBlockchainServer

	// Chain resolves a ChainRef to the chain it names, for the stream
	// whose context is ctx (its metadata: the API key); its error is the
	// status the stream ends with (UNAVAILABLE naming the chains served).
	Chain func(ctx context.Context, ref pb.ChainRef) (StreamChain, error)
	// Chains lists the served chains the stream whose context is ctx may
	// read, for the status streams; its error (the caller may read none)
	// is the status the stream ends with.
	Chains func(ctx context.Context) ([]ServedChain, error)
	// Open charges the opening of SubscribeHead or a status stream, whose
	// context is ctx, on the chain served as ref (a status stream: its
	// first chain) to its caller: one call from its rate limits. Its
	// error (RESOURCE_EXHAUSTED over a limit) is the status the stream
	// ends with before sending anything. nil: streams cost nothing.
	// NativeSubscribe pays by its eth_subscribe.
	Open func(ctx context.Context, ref pb.ChainRef) error
	// Changed is closed when the chains served next change (a config
	// reload; nil: never): a stream whose chain left ends, the status
	// streams report the chains added and removed.
	Changed func() <-chan struct{}
	// Heartbeat is NativeSubscribe's heartbeat interval (grpc.heartbeat;
	// 0: DefaultHeartbeat).
	Heartbeat time.Duration
	// Recheck is how often the status streams read the remotes' status
	// again between head changes (grpc.status_recheck; 0:
	// DefaultStatusRecheck).
	Recheck time.Duration

	// stopping is closed by stop: every stream ends (nil: never).
	stopping chan struct{}
	stopOnce sync.Once
}

// errStopping is what a stream ends with when the server stops.
var errStopping = status.Error(codes.Unavailable, "server is shutting down")

// stop ends every stream with UNAVAILABLE, for a graceful stop.
func (s *Streams) stop() {
	s.stopOnce.Do(func() {
		if s.stopping != nil {
			close(s.stopping)
		}
	})
}

// ServedChain is one chain a status stream reports.
type ServedChain struct {
	Ref   pb.ChainRef
	Chain StreamChain
}

// changed is closed at the next change of the chains served; nil (never)
// without Changed.
func (s *Streams) changed() <-chan struct{} {
	if s.Changed == nil {
		return nil
	}
	return s.Changed()
}

// tenure is what ends a stream on one chain besides its client: the
// server stopping, or its chain leaving the chains served (a reload
// removed it, or serves another chain under its ChainRef).
type tenure struct {
	s     *Streams
	ctx   context.Context
	ref   pb.ChainRef
	w     *headstore.Window // the chain's: a chain a reload keeps keeps it
	table <-chan struct{}   // closed at the next change of the chains served
}

func (s *Streams) tenure(ctx context.Context, ref pb.ChainRef, ch StreamChain) *tenure {
	return &tenure{s: s, ctx: ctx, ref: ref, w: ch.Window(), table: s.changed()}
}

// recheck is called once t.table has closed: nil while the chain is still
// served under its ref, else the status the stream ends with.
func (t *tenure) recheck() error {
	t.table = t.s.changed() // before the look: a change during it is not missed
	if now, err := t.s.resolve(t.ctx, t.ref); err == nil && now.Window() == t.w {
		return nil
	}
	return status.Errorf(codes.Unavailable, "chain %s is no longer served here: a config reload removed or replaced it", refName(t.ref))
}

func (s *Streams) resolve(ctx context.Context, ref pb.ChainRef) (StreamChain, error) {
	if s.Chain == nil {
		return nil, status.Error(codes.Unavailable, "no chain is served")
	}
	return s.Chain(ctx, ref)
}

// open is Open's charge for a stream opened on ref.
func (s *Streams) open(ctx context.Context, ref pb.ChainRef) error {
	if s.Open == nil {
		return nil
	}
	return s.Open(ctx, ref)
}

func (s *Streams) recheck() time.Duration {
	if s.Recheck > 0 {
		return s.Recheck
	}
	return DefaultStatusRecheck
}

// Caller is a chain's router as the streams call it: the JSON-RPC call
// path, eth_subscribe included, that WebSocket clients reach.
type Caller interface {
	ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error)
}
