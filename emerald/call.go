package emerald

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// NativeCall serves each item as one JSON-RPC call through the chain's
// jrpc handler, up to grpc.concurrency at once, and sends each reply as
// its call finishes (in request order when sorted is set). A request
// refused as a whole by the edge (no key, rate limited) ends with a
// status instead.
func (s *Server) NativeCall(req *pb.NativeCallRequest, stream grpc.ServerStreamingServer[pb.NativeCallReplyItem]) error {
	c, err := s.chain(req.GetChain())
	if err != nil {
		return err
	}
	items := req.GetItems()
	if len(items) == 0 {
		return status.Error(codes.InvalidArgument, "NativeCall: no items")
	}
	if s.opts.MaxItems > 0 && len(items) > s.opts.MaxItems {
		return status.Errorf(codes.ResourceExhausted, "NativeCall: %d items, over limits.max_batch_items (%d)", len(items), s.opts.MaxItems)
	}
	floor, err := checkRequest(req)
	if err != nil {
		return err
	}
	if m := req.GetMinAvailability(); m != pb.AvailabilityEnum_AVAIL_UNKNOWN {
		if a := c.availability(); a > m {
			return status.Errorf(codes.Unavailable, "chain %s is %s, under min_availability %s", refName(c.Ref()), a, m)
		}
	}
	ctx := stream.Context()
	in := jrpc.Inbound{Chain: c.Name, Transport: Transport, Header: s.header(ctx)}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		in.RemoteAddr = p.Addr.String()
	}

	if len(items) == 1 {
		// The usual call: served on the stream's goroutine, where a
		// dispatcher and an item goroutine cost more than the item did
		// (each new goroutine grew its stack through the router's frames).
		rep, err := s.callItem(ctx, in, items[0], floor, c.Window)
		if err != nil {
			return err
		}
		return s.send(stream, rep, req.GetChunkSize())
	}

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup // the dispatcher and the items: none outlives the call
	defer func() { cancel(); wg.Wait() }()
	type result struct {
		i   int
		rep *pb.NativeCallReplyItem
		err error // the request refused as a whole
	}
	results := make(chan result, len(items))
	slots := make(chan struct{}, s.cfg.Concurrency)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, it := range items {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				rep, err := s.callItem(ctx, in, it, floor, c.Window)
				results <- result{i: i, rep: rep, err: err}
			}()
		}
	}()

	sorted := req.GetSorted()
	pending := make(map[int]*pb.NativeCallReplyItem)
	next := 0
	for range items {
		var r result
		select {
		case r = <-results:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
		if r.err != nil {
			return r.err
		}
		if !sorted {
			if err := s.send(stream, r.rep, req.GetChunkSize()); err != nil {
				return err
			}
			continue
		}
		pending[r.i] = r.rep
		for rep, ok := pending[next]; ok; rep, ok = pending[next] {
			delete(pending, next)
			next++
			if err := s.send(stream, rep, req.GetChunkSize()); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRequest refuses what venn has no equivalent for, naming it, and
// returns the floor of the request's selector (selector.go).
func checkRequest(req *pb.NativeCallRequest) (jrpc.MinHead, error) {
	if q := req.GetQuorum(); q > 1 {
		return jrpc.MinHead{}, status.Errorf(codes.InvalidArgument, "NativeCall: quorum %d is not served: consensus is the chain's config (consensus section), not per request", q)
	}
	floor, err := selectorFloor(req.GetSelector())
	if err != nil {
		return jrpc.MinHead{}, err
	}
	for _, it := range req.GetItems() {
		for _, sel := range it.GetSelectors() {
			if _, err := selectorFloor(sel); err != nil {
				return jrpc.MinHead{}, err
			}
		}
		if it.GetRestData() != nil {
			return jrpc.MinHead{}, status.Errorf(codes.InvalidArgument, "NativeCall: item %d: rest_data is not served (JSON-RPC chains only)", it.GetId())
		}
	}
	return floor, nil
}

// callItem serves one item under the request's floor and its own
// selectors' (itemFloor). A reply is the item's answer or its error, with
// the source that answered it (upstreamID) and the chain's finalization as
// w, its head window (nil: none), knows it; err is the request refused as
// a whole (by the Gate, or venn stopping).
func (s *Server) callItem(ctx context.Context, in jrpc.Inbound, it *pb.NativeCallItem, floor jrpc.MinHead, w *headstore.Window) (*pb.NativeCallReplyItem, error) {
	rep := &pb.NativeCallReplyItem{Id: it.GetId()}
	method := it.GetMethod()
	if method == "" {
		return itemError(rep, jrpc.CodeInvalidRequest, "method is empty", nil), nil
	}
	params := it.GetPayload()
	if len(params) > 0 && !json.Valid(params) {
		return itemError(rep, jrpc.CodeParseError, "payload is not JSON: it holds the call's params, a JSON array", nil), nil
	}
	if rid := it.GetRequestId(); rid != "" && in.Header.Get("X-Request-Id") == "" {
		in.Header = in.Header.Clone()
		in.Header.Set("X-Request-Id", rid)
	}
	var note jrpc.Note
	in.Note, in.MinHead = &note, itemFloor(floor, it)
	result, callErr, refused := serveOne(ctx, s.h, in, method, params)
	rep.UpstreamId = upstreamID(&note)
	rep.Finalization = finalizedOf(w)
	if refused != nil {
		if st := refusal(refused); st != nil {
			return nil, st
		}
		callErr = refused
	}
	if callErr != nil {
		return itemError(rep, callErr.Code, callErr.Message, callErr.Data), nil
	}
	rep.Succeed = true
	rep.Payload = result
	return rep, nil
}

// upstreamID is the reply's upstream_id for a call answered as n says:
// the remote's name (the names, comma-joined, of a call served from
// several: a split eth_getLogs), or for an answer venn gave itself
// "venn:" and the part that gave it (venn:head, venn:history, venn:cache,
// venn:forger, venn:local), which no remote's name can be (names are
// [A-Za-z0-9_.-]+). "" when nothing answered (a refused call) or the
// answer was another identical call's, shared while in flight.
func upstreamID(n *jrpc.Note) string {
	switch {
	case n.Source == "remotes":
		return n.Remote
	case n.Source != "":
		return SelfID + n.Source
	}
	return ""
}

// SelfID prefixes the upstream_id of answers venn gave itself.
const SelfID = "venn:"

// finalizedOf is the chain's finalized block as w knows it (the safe
// block while none is finalized); nil when it knows neither.
func finalizedOf(w *headstore.Window) *pb.FinalizationData {
	if w == nil {
		return nil
	}
	t, ok := w.Tags()
	switch {
	case !ok:
		return nil
	case t.Finalized > 0:
		return &pb.FinalizationData{Height: t.Finalized, Type: pb.FinalizationType_FINALIZATION_FINALIZED_BLOCK}
	case t.Safe > 0:
		return &pb.FinalizationData{Height: t.Safe, Type: pb.FinalizationType_FINALIZATION_SAFE_BLOCK}
	}
	return nil
}

// refusal is the gRPC status for a message refused as a whole before any
// call ran, nil for an error that is the item's.
func refusal(e *jrpc.Error) error {
	var c codes.Code
	switch e.Code {
	case jrpc.CodeUnauthorized:
		c = codes.Unauthenticated
		if strings.Contains(e.Message, "may not") {
			c = codes.PermissionDenied
		}
	case jrpc.CodeRateLimited:
		c = codes.ResourceExhausted
	case jrpc.CodeShuttingDown:
		c = codes.Unavailable
	case jrpc.CodeUnknownChain:
		c = codes.Unavailable
	default:
		return nil
	}
	return status.Error(c, refusedMessage(e, retryAfter(e.Data)))
}

// refusedMessage is a refusal's status message: the error, and the wait in
// whole seconds when there is one.
func refusedMessage(e *jrpc.Error, wait string) string {
	msg := fmt.Sprintf("%s (JSON-RPC %d)", e.Message, e.Code)
	if wait != "" {
		msg += "; retry after " + wait + " s"
	}
	return msg
}

// retryAfter is the wait a rate-limit error's data gives
// ({"retry_after_ms":2500}) in whole seconds, rounded up as Retry-After
// says it; "" when the data gives none.
func retryAfter(data json.RawMessage) string {
	var d struct {
		MS int64 `json:"retry_after_ms"`
	}
	if len(data) == 0 || json.Unmarshal(data, &d) != nil || d.MS <= 0 {
		return ""
	}
	return strconv.FormatInt((d.MS+999)/1000, 10)
}

// itemError fills rep as a failed item.
func itemError(rep *pb.NativeCallReplyItem, code int, msg string, data json.RawMessage) *pb.NativeCallReplyItem {
	rep.Succeed = false
	rep.ItemErrorCode = int32(code)
	rep.ErrorMessage = msg
	if code < 0 {
		rep.ErrorCode = uint32(-code) // the deprecated field, as Dshackle fills it
	} else {
		rep.ErrorCode = uint32(code)
	}
	if len(data) > 0 {
		rep.ErrorData = string(data)
	}
	return rep
}

// send sends rep, cut into chunk-byte replies of its payload when chunk
// is set and the payload is longer.
func (s *Server) send(stream grpc.ServerStreamingServer[pb.NativeCallReplyItem], rep *pb.NativeCallReplyItem, chunk uint32) error {
	if chunk == 0 || len(rep.Payload) <= int(chunk) {
		return stream.Send(rep)
	}
	p := rep.Payload
	for len(p) > 0 {
		n := min(int(chunk), len(p))
		part := &pb.NativeCallReplyItem{Id: rep.Id, Succeed: true, Payload: p[:n], UpstreamId: rep.UpstreamId,
			Finalization: rep.Finalization, Chunked: true, FinalChunk: n == len(p)}
		if err := stream.Send(part); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}
