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
func (s *Streams) served(ctx context.Context, refs []pb.ChainRef) ([]ServedChain, error) {
	if len(refs) == 0 {
		if s.Chains == nil {
			return nil, nil
		}
		return s.Chains(ctx), nil
	}
	out := make([]ServedChain, 0, len(refs))
	for _, ref := range refs {
		ch, err := s.resolve(ctx, ref)
		if err != nil {
			return nil, err
		}
		out = append(out, ServedChain{Ref: ref, Chain: ch})
	}
	return out, nil
}

// watch calls fn now, then each time a head comes on one of chains or
// Recheck passes, until ctx ends or fn fails.
func (s *Streams) watch(ctx context.Context, chains []ServedChain, fn func() error) error {
	t := time.NewTicker(s.recheck())
	defer t.Stop()
	cases := make([]reflect.SelectCase, len(chains)+3)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)}
	cases[2] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.stopping)}
	for {
		for i, c := range chains {
			cases[i+3] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c.Chain.Window().Changed())}
		}
		if err := fn(); err != nil {
			return err
		}
		switch i, _, _ := reflect.Select(cases); i {
		case 0:
			return endStatus(ctx)
		case 2:
			return errStopping
		}
	}
}

// SubscribeStatus streams each chain's availability and quorum (the
// remotes in rotation): every chain asked for (none: all) first, then a
// chain each time its status changes.
func (s *Streams) SubscribeStatus(req *pb.StatusRequest, stream grpc.ServerStreamingServer[pb.ChainStatus]) error {
	chains, err := s.served(stream.Context(), req.GetChains())
	if err != nil {
		return err
	}
	last := make([]*pb.ChainStatus, len(chains))
	return s.watch(stream.Context(), chains, func() error {
		for i, c := range chains {
			av, q := chainAvailability(c.Chain, c.Chain.Remotes())
			st := &pb.ChainStatus{Chain: c.Ref, Availability: av, Quorum: q}
			if proto.Equal(st, last[i]) {
				continue
			}
			if err := stream.Send(st); err != nil {
				return err
			}
			last[i] = st
		}
		return nil
	})
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

// SubscribeChainStatus streams every chain's description: a full one per
// chain first (full_response), then for a chain only the events that
// changed since (deltas).
func (s *Streams) SubscribeChainStatus(_ *pb.SubscribeChainStatusRequest, stream grpc.ServerStreamingServer[pb.SubscribeChainStatusResponse]) error {
	chains, err := s.served(stream.Context(), nil)
	if err != nil {
		return err
	}
	last := make([][]*pb.ChainEvent, len(chains))
	return s.watch(stream.Context(), chains, func() error {
		for i, c := range chains {
			evs := chainEvents(c.Ref, c.Chain)
			full := last[i] == nil
			send := evs
			if !full {
				send = nil
				for j, ev := range evs {
					if !proto.Equal(ev, last[i][j]) {
						send = append(send, ev)
					}
				}
				if len(send) == 0 {
					continue
				}
			}
			if err := stream.Send(&pb.SubscribeChainStatusResponse{
				ChainDescription: &pb.ChainDescription{Chain: c.Ref, ChainEvent: send},
				FullResponse:     full,
			}); err != nil {
				return err
			}
			last[i] = evs
		}
		return nil
	})
}

// SubscribeNodeStatus streams each chain's remotes as nodes, by name
// (never a URL): every node first, then a node each time its head or
// availability changes.
func (s *Streams) SubscribeNodeStatus(_ *pb.SubscribeNodeStatusRequest, stream grpc.ServerStreamingServer[pb.NodeStatusResponse]) error {
	chains, err := s.served(stream.Context(), nil)
	if err != nil {
		return err
	}
	last := map[string]*pb.NodeStatusResponse{}
	return s.watch(stream.Context(), chains, func() error {
		for _, c := range chains {
			for _, r := range c.Chain.Remotes() {
				ns := &pb.NodeStatusResponse{
					NodeId: r.Name,
					Description: &pb.NodeDescription{
						Chain:                  c.Ref,
						NodeLabels:             []*pb.NodeLabels{{Labels: []*pb.Label{{Name: "tier", Value: r.Tier}}}},
						SupportedSubscriptions: slices.Clone(streamSubscriptions),
					},
					Status: &pb.NodeStatus{CurrentHeight: int64(r.Head), Availability: nodeAvailability(r)},
				}
				key := c.Ref.String() + "/" + r.Name
				if proto.Equal(ns, last[key]) {
					continue
				}
				if err := stream.Send(ns); err != nil {
					return err
				}
				last[key] = ns
			}
		}
		return nil
	})
}
