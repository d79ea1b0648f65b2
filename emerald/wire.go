package emerald

import (
	"context"
	"encoding/json"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
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
	result, callErr, refused := serveOne(ctx, c.h, c.in, req.Method, req.Params)
	switch {
	case refused != nil:
		return nil, refused
	case callErr != nil:
		return nil, callErr
	}
	return result, nil
}

// serveOne sends one call through h as a JSON-RPC message, as HTTP would
// carry it, and reads its answer: the result or the call's error. refused
// is the message refused as a whole (the Gate, venn stopping).
func serveOne(ctx context.Context, h Handler, in jrpc.Inbound, method string, params json.RawMessage) (result json.RawMessage, callErr, refused *jrpc.Error) {
	if len(params) == 0 {
		params = json.RawMessage("[]")
	}
	m, _ := json.Marshal(method)
	body := make([]byte, 0, len(params)+len(m)+48)
	body = append(body, `{"jsonrpc":"2.0","id":1,"method":`...)
	body = append(body, m...)
	body = append(body, `,"params":`...)
	body = append(body, params...)
	in.Body = append(body, '}')
	out, refused := h.ServeInbound(ctx, in, nil)
	if refused != nil {
		return nil, nil, refused
	}
	result, callErr = readAnswer(out)
	return result, callErr, nil
}

// readAnswer is the result of the one JSON-RPC answer h wrote, a slice of
// it, or its error. h's answer is well-formed JSON, so it is scanned, not
// decoded: decoding validated and copied a block's worth of result a
// second time, the most CPU a head-served NativeCall spent in venn's own
// code.
func readAnswer(out []byte) (result json.RawMessage, callErr *jrpc.Error) {
	i := jsonscan.SkipSpace(out, 0)
	if i >= len(out) || out[i] != '{' {
		return nil, notAnswer()
	}
	members := jsonscan.Object{Data: out, I: i + 1}
	for {
		k, v, ok := members.Next()
		if !ok {
			return result, nil
		}
		switch string(k) {
		case "result":
			result = v
		case "error":
			if string(v) == "null" {
				continue
			}
			var e jrpc.Error
			if err := json.Unmarshal(v, &e); err != nil {
				return nil, notAnswer()
			}
			return nil, &e
		}
	}
}

func notAnswer() *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeInternal, Message: "answer is not a JSON-RPC response"}
}
