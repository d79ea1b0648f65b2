package emerald

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	rstatus "github.com/venn-gateway/venn/remotes/status"
)

// servedChain is a served Chain as the streams read it: eth_subscribe
// goes through the server's jrpc handler as the stream's client.
type servedChain struct {
	inboundCaller
	c Chain
}

func (sc servedChain) Window() *headstore.Window { return sc.c.Window }
func (sc servedChain) Remotes() []rstatus.Remote { return sc.c.Remotes() }

// streamChain is Streams.Chain: the chain served as ref, for the stream
// whose context is ctx.
func (s *Server) streamChain(ctx context.Context, ref pb.ChainRef) (StreamChain, error) {
	c, err := s.chain(ref)
	if err != nil {
		return nil, err
	}
	if c.Window == nil {
		return nil, status.Errorf(codes.Unavailable, "chain %s has no head window on this replica", refName(ref))
	}
	return s.served1(ctx, c), nil
}

// streamChains is Streams.Chains: every chain served with a head window.
func (s *Server) streamChains(ctx context.Context) []ServedChain {
	var out []ServedChain
	for _, c := range s.chains() {
		if r := c.Ref(); r != pb.ChainRef_CHAIN_UNSPECIFIED && c.Window != nil {
			out = append(out, ServedChain{Ref: r, Chain: s.served1(ctx, c)})
		}
	}
	return out
}

func (s *Server) served1(ctx context.Context, c Chain) servedChain {
	in := jrpc.Inbound{Chain: c.Name, Transport: Transport, Header: s.header(ctx)}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		in.RemoteAddr = p.Addr.String()
	}
	return servedChain{inboundCaller: inboundCaller{h: s.h, in: in}, c: c}
}

// inboundCaller is a Caller over the server's jrpc handler (Handler, the
// one that serves HTTP bodies): eth_subscribe from a NativeSubscribe
// passes the Gate (API keys from the metadata, method lists, rate limits)
// and the router, as a WebSocket one does.
type inboundCaller struct {
	h  Handler
	in jrpc.Inbound // Body is set per call
}

// ServeRPC implements Caller: req as one JSON-RPC message; its answer's
// result, or its error as a *jrpc.Error.
func (c inboundCaller) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
	m, _ := json.Marshal(req.Method)
	params := req.Params
	if len(params) == 0 {
		params = json.RawMessage("[]")
	}
	in := c.in
	in.Body = []byte(`{"jsonrpc":"2.0","id":1,"method":` + string(m) + `,"params":` + string(params) + `}`)
	out, refused := c.h.ServeInbound(ctx, in, nil)
	if refused != nil {
		return nil, refused
	}
	var reply struct {
		Result json.RawMessage `json:"result"`
		Error  *jrpc.Error     `json:"error"`
	}
	if err := json.Unmarshal(out, &reply); err != nil {
		return nil, fmt.Errorf("%s: answer: %w", req.Method, err)
	}
	if reply.Error != nil {
		return nil, reply.Error
	}
	return reply.Result, nil
}
