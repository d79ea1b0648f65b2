package emerald

import (
	"context"
	"reflect"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/venn-gateway/venn/emerald/pb"
	rstatus "github.com/venn-gateway/venn/remotes/status"
)

// The subscriptions NativeSubscribe serves (newPendingTransactions only
// where a remote relays it), and the capabilities every chain has.
var (
	streamSubscriptions = []string{"newHeads", "logs", "newPendingTransactions"}
	chainCapabilities   = []pb.Capabilities{pb.Capabilities_CAP_CALLS, pb.Capabilities_CAP_WS_HEAD}
)

// chainAvailability is a chain's availability as Dshackle words it: OK
// with a remote in rotation and a head in the window, SYNCING with
// remotes but no head yet, UNAVAILABLE with no remote in rotation.
func chainAvailability(ch StreamChain, rs []rstatus.Remote) (pb.AvailabilityEnum, uint32) {
	var in uint32
	for _, r := range rs {
		if r.InRotation {
			in++
		}
	}
	switch _, _, ok := ch.Window().Head(); {
	case in == 0:
		return pb.AvailabilityEnum_AVAIL_UNAVAILABLE, 0
	case !ok:
		return pb.AvailabilityEnum_AVAIL_SYNCING, in
	}
	return pb.AvailabilityEnum_AVAIL_OK, in
}

// nodeAvailability is one remote's: OK in rotation, LAGGING when out and
// behind, else UNAVAILABLE.
func nodeAvailability(r rstatus.Remote) pb.AvailabilityEnum {
	switch {
	case r.InRotation:
		return pb.AvailabilityEnum_AVAIL_OK
	case r.Lag > 0:
		return pb.AvailabilityEnum_AVAIL_LAGGING
	}
	return pb.AvailabilityEnum_AVAIL_UNAVAILABLE
}

// served is the chains a status stream reports: those named (none: all).
// strict: a named chain not served is the stream's error (its start);
// else it is left out (a reload removed it).
func (s *Streams) served(ctx context.Context, refs []pb.ChainRef, strict bool) ([]ServedChain, error) {
	if len(refs) == 0 {
		if s.Chains == nil {
			return nil, nil
		}
		cs, err := s.Chains(ctx)
		if err != nil && !strict {
			err = nil // a reload's look: the stream keeps what it had
		}
		return cs, err
	}
	out := make([]ServedChain, 0, len(refs))
	for _, ref := range refs {
		ch, err := s.resolve(ctx, ref)
		switch {
		case err == nil:
			out = append(out, ServedChain{Ref: ref, Chain: ch})
		case strict:
			return nil, err
		}
	}
	return out, nil
}

// statusFeed is what one status stream says, as messages each under a key
// (a chain's ref; a node's chain and name): a key's message is sent when
// it differs from the last one sent under it.
type statusFeed[T proto.Message] struct {
	// now lists the messages of chains as they stand, in the order sent.
	now func(chains []ServedChain, put func(key string, m T))
	// delta is what to send of cur when prev was the last sent under its
	// key (the zero T: none yet); false sends nothing. nil: cur, when it
	// differs from prev.
	delta func(prev, cur T) (T, bool)
	// gone is what to send once for a key no longer listed: its chain or
	// remote left with a reload.
	gone func(prev T) T
}

// keyed is one message of a statusFeed.
type keyed[T proto.Message] struct {
	key string
	m   T
}

// streamStatus serves a status stream of the chains refs names (none:
// every chain served) as f says: every message first, then, each time a
// head comes on one of the chains, Recheck passes or a reload changes the
// chains served, those that changed. A chain or remote a reload removes is
// sent once more (f.gone); one it adds is sent as new. Opening it costs
// the caller one call (Open), however many chains it reports.
func streamStatus[T proto.Message](s *Streams, ctx context.Context, refs []pb.ChainRef, f statusFeed[T], send func(T) error) error {
	chains, err := s.served(ctx, refs, true)
	if err != nil {
		return err
	}
	if len(chains) > 0 {
		if err := s.open(ctx, chains[0].Ref); err != nil {
			return err
		}
	}
	table := s.changed()
	t := time.NewTicker(s.recheck())
	defer t.Stop()
	last := map[string]T{}
	var order []string // the keys of last, in the order first sent
	var now []keyed[T]
	put := func(key string, m T) { now = append(now, keyed[T]{key, m}) }
	for {
		now = now[:0]
		f.now(chains, put)
		listed := make(map[string]bool, len(now))
		for _, k := range now {
			listed[k.key] = true
			prev, had := last[k.key]
			out, ok := k.m, !had || !proto.Equal(prev, k.m)
			if f.delta != nil {
				out, ok = f.delta(prev, k.m)
			}
			if ok {
				if err := send(out); err != nil {
					return err
				}
			}
			if !had {
				order = append(order, k.key)
			}
			last[k.key] = k.m
		}
		kept := order[:0]
		for _, key := range order {
			if listed[key] {
				kept = append(kept, key)
				continue
			}
			if err := send(f.gone(last[key])); err != nil {
				return err
			}
			delete(last, key)
		}
		order = kept

		cases := make([]reflect.SelectCase, 0, len(chains)+4)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.stopping)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(table)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)})
		for _, c := range chains {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.Chain.Window().Changed())})
		}
		switch i, _, _ := reflect.Select(cases); i {
		case 0:
			return endStatus(ctx)
		case 1:
			return errStopping
		case 2:
			table = s.changed() // before the look: a change during it is not missed
			chains, _ = s.served(ctx, refs, false)
		}
	}
}

// SubscribeStatus streams each chain's availability and quorum (the
// remotes in rotation): every chain asked for (none: all) first, then a
// chain each time its status changes. A chain a reload removes is sent
// once as AVAIL_UNAVAILABLE; one it adds (or adds back) is sent.
func (s *Streams) SubscribeStatus(req *pb.StatusRequest, stream grpc.ServerStreamingServer[pb.ChainStatus]) error {
	return streamStatus(s, stream.Context(), req.GetChains(), statusFeed[*pb.ChainStatus]{
		now: func(chains []ServedChain, put func(string, *pb.ChainStatus)) {
			for _, c := range chains {
				av, q := chainAvailability(c.Chain, c.Chain.Remotes())
				put(c.Ref.String(), &pb.ChainStatus{Chain: c.Ref, Availability: av, Quorum: q})
			}
		},
		gone: func(prev *pb.ChainStatus) *pb.ChainStatus {
			return &pb.ChainStatus{Chain: prev.Chain, Availability: pb.AvailabilityEnum_AVAIL_UNAVAILABLE}
		},
	}, stream.Send)
}

// chainEvents is everything SubscribeChainStatus says about a chain, one
// event per kind, in a fixed order.
func chainEvents(ref pb.ChainRef, ch StreamChain) []*pb.ChainEvent {
	rs := ch.Remotes()
	av, q := chainAvailability(ch, rs)
	v := ch.Window().View()
	head := &pb.HeadEvent{}
	if len(v.Canon) > 0 {
		h := chainHead(v.Canon[len(v.Canon)-1])
		head = &pb.HeadEvent{Height: h.Height, BlockId: h.BlockId, Timestamp: h.Timestamp, Weight: h.Weight, ParentBlockId: h.ParentBlockId}
	}
	nodes := make([]*pb.NodeDetails, 0, len(rs))
	for _, r := range rs {
		if r.InRotation {
			nodes = append(nodes, &pb.NodeDetails{Quorum: 1, Labels: []*pb.Label{{Name: "name", Value: r.Name}}})
		}
	}
	return []*pb.ChainEvent{
		{ChainEvent: &pb.ChainEvent_Status{Status: &pb.ChainStatus{Chain: ref, Availability: av, Quorum: q}}},
		{ChainEvent: &pb.ChainEvent_Head{Head: head}},
		{ChainEvent: &pb.ChainEvent_SupportedSubscriptionsEvent{SupportedSubscriptionsEvent: &pb.SupportedSubscriptionsEvent{Subs: streamSubscriptions}}},
		{ChainEvent: &pb.ChainEvent_CapabilitiesEvent{CapabilitiesEvent: &pb.CapabilitiesEvent{Capabilities: chainCapabilities}}},
		{ChainEvent: &pb.ChainEvent_LowerBoundsEvent{LowerBoundsEvent: &pb.LowerBoundEvent{LowerBounds: lowerBounds(rs)}}},
		{ChainEvent: &pb.ChainEvent_FinalizationDataEvent{FinalizationDataEvent: &pb.FinalizationDataEvent{FinalizationData: finalization(v)}}},
		{ChainEvent: &pb.ChainEvent_NodesEvent{NodesEvent: &pb.NodeDetailsEvent{Nodes: nodes}}},
	}
}

// chainDelta is what SubscribeChainStatus sends of a chain's description
// cur after prev: all of it first (full_response), then the events that
// changed, if any.
func chainDelta(prev, cur *pb.SubscribeChainStatusResponse) (*pb.SubscribeChainStatusResponse, bool) {
	if prev == nil {
		return cur, true
	}
	was := prev.GetChainDescription().GetChainEvent()
	var send []*pb.ChainEvent
	for j, ev := range cur.GetChainDescription().GetChainEvent() {
		if j >= len(was) || !proto.Equal(ev, was[j]) {
			send = append(send, ev)
		}
	}
	if len(send) == 0 {
		return nil, false
	}
	return &pb.SubscribeChainStatusResponse{
		ChainDescription: &pb.ChainDescription{Chain: cur.GetChainDescription().GetChain(), ChainEvent: send}}, true
}

// SubscribeChainStatus streams every chain's description: a full one per
// chain first (full_response), then for a chain only the events that
// changed since (deltas). A chain a reload removes gets a last delta:
// AVAIL_UNAVAILABLE and no nodes; one it adds gets a full one.
func (s *Streams) SubscribeChainStatus(_ *pb.SubscribeChainStatusRequest, stream grpc.ServerStreamingServer[pb.SubscribeChainStatusResponse]) error {
	return streamStatus(s, stream.Context(), nil, statusFeed[*pb.SubscribeChainStatusResponse]{
		now: func(chains []ServedChain, put func(string, *pb.SubscribeChainStatusResponse)) {
			for _, c := range chains {
				put(c.Ref.String(), &pb.SubscribeChainStatusResponse{FullResponse: true,
					ChainDescription: &pb.ChainDescription{Chain: c.Ref, ChainEvent: chainEvents(c.Ref, c.Chain)}})
			}
		},
		delta: chainDelta,
		gone: func(prev *pb.SubscribeChainStatusResponse) *pb.SubscribeChainStatusResponse {
			ref := prev.GetChainDescription().GetChain()
			return &pb.SubscribeChainStatusResponse{ChainDescription: &pb.ChainDescription{Chain: ref, ChainEvent: []*pb.ChainEvent{
				{ChainEvent: &pb.ChainEvent_Status{Status: &pb.ChainStatus{Chain: ref, Availability: pb.AvailabilityEnum_AVAIL_UNAVAILABLE}}},
				{ChainEvent: &pb.ChainEvent_NodesEvent{NodesEvent: &pb.NodeDetailsEvent{}}},
			}}}
		},
	}, stream.Send)
}

// SubscribeNodeStatus streams each chain's remotes as nodes, by name
// (never a URL): every node first, then a node each time its head or
// availability changes. A remote a reload removes, or whose chain it
// removes, is sent once more as AVAIL_UNAVAILABLE.
func (s *Streams) SubscribeNodeStatus(_ *pb.SubscribeNodeStatusRequest, stream grpc.ServerStreamingServer[pb.NodeStatusResponse]) error {
	return streamStatus(s, stream.Context(), nil, statusFeed[*pb.NodeStatusResponse]{
		now: func(chains []ServedChain, put func(string, *pb.NodeStatusResponse)) {
			for _, c := range chains {
				for _, r := range c.Chain.Remotes() {
					put(c.Ref.String()+"/"+r.Name, &pb.NodeStatusResponse{
						NodeId: r.Name,
						Description: &pb.NodeDescription{
							Chain:                  c.Ref,
							NodeLabels:             []*pb.NodeLabels{{Labels: []*pb.Label{{Name: "tier", Value: r.Tier}}}},
							SupportedSubscriptions: slices.Clone(streamSubscriptions),
						},
						Status: &pb.NodeStatus{CurrentHeight: int64(r.Head), Availability: nodeAvailability(r)},
					})
				}
			}
		},
		gone: func(prev *pb.NodeStatusResponse) *pb.NodeStatusResponse {
			ns := proto.CloneOf(prev)
			ns.Status.Availability = pb.AvailabilityEnum_AVAIL_UNAVAILABLE
			return ns
		},
	}, stream.Send)
}
