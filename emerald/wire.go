package emerald

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	rstatus "github.com/venn-gateway/venn/remotes/status"
)

// Transport names gRPC in jrpc.Peer.Transport, the Gate's Admission and
// the request log.
const Transport = "grpc"

// Handler serves one JSON-RPC message of a chain: jrpc.Server's
// ServeInbound, the same that serves HTTP bodies.
type Handler interface {
	ServeInbound(ctx context.Context, in jrpc.Inbound, buf []byte) ([]byte, *jrpc.Error)
}

var _ Handler = (*jrpc.Server)(nil)

// servedChain is a served Chain as the streams read it: eth_subscribe
// goes through the server's jrpc handler as the stream's client.
type servedChain struct {
	inboundCaller
	c Chain
}

func (sc servedChain) Window() *headstore.Window { return sc.c.Window }
func (sc servedChain) Remotes() []rstatus.Remote { return sc.c.Remotes() }

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
