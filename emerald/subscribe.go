package emerald

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/jrpc"
)

// unsubscribeMethod is the one unsubscribe_method venn serves: the
// subscription is the subcenter's, whatever the client names.
const unsubscribeMethod = "eth_unsubscribe"

// NativeSubscribe serves eth_subscribe over gRPC: the stream is a
// connection of the chain's subcenter, like a WebSocket one, so it gets
// the same notifications (newHeads, logs with removed: true on a reorg,
// newPendingTransactions), each item's payload the WebSocket
// notification's result byte for byte, and the same slow-consumer rule.
// A heartbeat item goes out every Heartbeat. A reload that removes the
// chain ends the stream with UNAVAILABLE. When the stream ends, the
// subscription is dropped (by unsubscribe_method when the client names
// it: only eth_unsubscribe is served).
func (s *Streams) NativeSubscribe(req *pb.NativeSubscribeRequest, stream grpc.ServerStreamingServer[pb.NativeSubscribeReplyItem]) error {
	ch, err := s.resolve(stream.Context(), req.GetChain())
	if err != nil {
		return err
	}
	if m := req.GetUnsubscribeMethod(); m != "" && m != unsubscribeMethod {
		return status.Errorf(codes.InvalidArgument, "unsubscribe_method %q is not served: only %s is", m, unsubscribeMethod)
	}
	params, err := subscribeParams(req.GetMethod(), req.GetPayload())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	ten := s.tenure(stream.Context(), req.GetChain(), ch)
	n := newStreamNotifier(stream.Context())
	defer n.cancel(nil)
	ctx := jrpc.ContextWithNotifier(stream.Context(), n)
	res, err := ch.ServeRPC(ctx, &jrpc.Request{Method: "eth_subscribe", Params: params})
	if err != nil {
		return subscribeStatus(err)
	}
	if req.GetUnsubscribeMethod() != "" {
		defer func() {
			// The stream's ctx is over: the call gets one of its own, on
			// the same connection.
			uctx := jrpc.ContextWithNotifier(context.WithoutCancel(stream.Context()), n)
			_, _ = ch.ServeRPC(uctx, &jrpc.Request{Method: unsubscribeMethod, Params: json.RawMessage("[" + string(res) + "]")})
		}()
	}
	hb := s.Heartbeat
	if hb == 0 {
		hb = DefaultHeartbeat
	}
	return n.run(stream.Send, hb, ten)
}

// subscribeParams is eth_subscribe's params for a NativeSubscribe: the
// method, then the payload: a JSON array's elements, or the one value it
// holds (a logs filter); nothing when it is empty.
func subscribeParams(method string, payload []byte) (json.RawMessage, error) {
	if method == "" {
		return nil, errors.New("method is empty: name a subscription (newHeads, logs, newPendingTransactions)")
	}
	name, _ := json.Marshal(method)
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 || string(payload) == "null" {
		return json.RawMessage("[" + string(name) + "]"), nil
	}
	if !json.Valid(payload) {
		return nil, errors.New("payload is not JSON")
	}
	if payload[0] == '[' {
		rest := bytes.TrimSpace(payload[1:])
		if rest[0] == ']' {
			return json.RawMessage("[" + string(name) + "]"), nil
		}
		return json.RawMessage("[" + string(name) + "," + string(rest)), nil
	}
	return json.RawMessage("[" + string(name) + "," + string(payload) + "]"), nil
}

// subscribeStatus is the status of an eth_subscribe refused: by the edge
// as a whole (no key, rate limited: refusal's statuses, as NativeCall's),
// by the method lists (PERMISSION_DENIED), or by the subcenter: bad params
// are INVALID_ARGUMENT, a subscription venn does not serve UNIMPLEMENTED,
// a limit RESOURCE_EXHAUSTED, another coded error FAILED_PRECONDITION and
// an uncoded one UNAVAILABLE; the message is the JSON-RPC error's.
func subscribeStatus(err error) error {
	var je *jrpc.Error
	if errors.As(err, &je) {
		if st := refusal(je); st != nil {
			return st
		}
		if je.Code == jrpc.CodeMethodNotFound && je.Message == subscribeBlocked {
			return status.Errorf(codes.PermissionDenied, "the methods lists (the API key's methods or block, methods.block) "+
				"refuse eth_subscribe to this caller: %s (JSON-RPC %d)", je.Message, je.Code)
		}
	}
	var coded interface{ ErrorCode() int }
	if !errors.As(err, &coded) {
		return status.Error(codes.Unavailable, err.Error())
	}
	switch coded.ErrorCode() {
	case jrpc.CodeInvalidParams:
		return status.Error(codes.InvalidArgument, err.Error())
	case jrpc.CodeMethodNotFound:
		return status.Error(codes.Unimplemented, err.Error())
	case jrpc.CodeLimitExceeded:
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.FailedPrecondition, err.Error())
}

// subscribeBlocked is the edge's answer to an eth_subscribe its method
// lists refuse: geth's words for a method it does not expose. The
// subcenter never answers eth_subscribe so (an unserved subscription's
// error names the subscription), so over gRPC it is told apart as a
// refusal.
const subscribeBlocked = "the method eth_subscribe does not exist/is not available"
