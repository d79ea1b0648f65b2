package emerald

import (
	"context"
	"slices"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/evm"
)

// subscriptions are what eth_subscribe serves (package subcenter).
var subscriptions = []string{"newHeads", "logs", "newPendingTransactions", "syncing"}

// Describe lists the chains served over gRPC: each one's availability, its
// remotes as nodes (named, never by URL), the subscriptions, and the
// methods venn knows split as the edge decides for the caller (its key in
// the metadata): those it may call in supportedMethods, the others
// (blocked, off its key's allowlist, or all on a chain its key may not
// use) in excludedMethods. A caller the edge admits on no chain (no key
// where keys are required) is refused as NativeCall would refuse it; one
// it admits pays one call from its rate limits (on the first chain it may
// use), as many chains as are described.
//
// currentHeight is left unset: it is field 7, which emeraldpay/dshackle's
// older definition gives to supportedSubscriptions (a repeated string),
// and a client built from it may fail on a varint there (protobuf.js
// reads field 7 as a string whatever its wire type) where an unset field
// is simply absent. drpcorg/emerald-grpc moved supportedSubscriptions to
// 8, where venn sends them; the head is on SubscribeHead and the status
// streams.
func (s *Server) Describe(ctx context.Context, _ *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	methods := evm.Methods()
	out := &pb.DescribeResponse{BuildInfo: &pb.BuildInfo{Version: s.opts.Version}}
	var (
		refused  error
		admitted *Chain // the first chain the caller may use
	)
	cs := s.chains()
	for i, c := range cs {
		ref := c.Ref()
		if ref == pb.ChainRef_CHAIN_UNSPECIFIED {
			continue
		}
		if err := s.admit(ctx, c); err != nil {
			refused = err
		} else if admitted == nil {
			admitted = &cs[i]
		}
		rs := c.Remotes()
		d := &pb.DescribeChain{
			Chain:                  ref,
			Status:                 &pb.ChainStatus{Chain: ref, Availability: c.availability(), Quorum: 1},
			SupportedMethods:       methods,
			SupportedSubscriptions: subscriptions,
			Capabilities:           []pb.Capabilities{pb.Capabilities_CAP_CALLS, pb.Capabilities_CAP_WS_HEAD},
		}
		if s.opts.Permitted != nil {
			d.SupportedMethods = s.opts.Permitted(ctx, s.inbound(ctx, c.Name), methods)
			d.ExcludedMethods = excluded(methods, d.SupportedMethods)
		}
		for _, r := range rs {
			d.Nodes = append(d.Nodes, &pb.NodeDetails{Quorum: 1, Labels: []*pb.Label{
				{Name: "name", Value: r.Name}, {Name: "tier", Value: r.Tier}}})
		}
		out.Chains = append(out.Chains, d)
	}
	switch {
	case admitted != nil:
		if err := s.take(ctx, *admitted); err != nil {
			return nil, err
		}
	case refused != nil:
		return nil, refused
	}
	return out, nil
}

// excluded is what of all is not in permitted.
func excluded(all, permitted []string) []string {
	var out []string
	for _, m := range all {
		if !slices.Contains(permitted, m) {
			out = append(out, m)
		}
	}
	return out
}
