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
	// Chains lists the served chains, for the status streams.
	Chains func(ctx context.Context) []ServedChain
	// Heartbeat is NativeSubscribe's heartbeat interval (0:
	// DefaultHeartbeat).
	Heartbeat time.Duration
	// Recheck is how often the status streams read the remotes' status
	// again between head changes (0: DefaultRecheck).
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

// DefaultRecheck is how often a status stream rereads the remotes when no
// head came.
const DefaultRecheck = 5 * time.Second

func (s *Streams) resolve(ctx context.Context, ref pb.ChainRef) (StreamChain, error) {
	if s.Chain == nil {
		return nil, status.Error(codes.Unavailable, "no chain is served")
	}
	return s.Chain(ctx, ref)
}

func (s *Streams) recheck() time.Duration {
	if s.Recheck > 0 {
		return s.Recheck
	}
	return DefaultRecheck
}

// Caller is a chain's router as the streams call it: the JSON-RPC call
// path, eth_subscribe included, that WebSocket clients reach.
type Caller interface {
	ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error)
}
