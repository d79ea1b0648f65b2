package emerald

import (
	"context"
	"math"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/evm"
)

// subscriptions are what eth_subscribe serves (package subcenter).
var subscriptions = []string{"newHeads", "logs", "newPendingTransactions", "syncing"}

// Describe lists the chains served over gRPC: each one's availability, its
// remotes as nodes (named, never by URL), the methods venn knows, the
// subscriptions, and the head.
func (s *Server) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	methods := evm.Methods()
	out := &pb.DescribeResponse{BuildInfo: &pb.BuildInfo{Version: s.opts.Version}}
	for _, c := range s.chains() {
		ref := c.Ref()
		if ref == pb.ChainRef_CHAIN_UNSPECIFIED {
			continue
		}
		rs := c.Remotes()
		d := &pb.DescribeChain{
			Chain:                  ref,
			Status:                 &pb.ChainStatus{Chain: ref, Availability: c.availability(), Quorum: 1},
			SupportedMethods:       methods,
			SupportedSubscriptions: subscriptions,
			Capabilities:           []pb.Capabilities{pb.Capabilities_CAP_CALLS, pb.Capabilities_CAP_WS_HEAD},
		}
		if h, ok := c.Head(); ok && h <= math.MaxInt64 {
			d.CurrentHeight = int64(h)
		}
		for _, r := range rs {
			d.Nodes = append(d.Nodes, &pb.NodeDetails{Quorum: 1, Labels: []*pb.Label{
				{Name: "name", Value: r.Name}, {Name: "tier", Value: r.Tier}}})
		}
		out.Chains = append(out.Chains, d)
	}
	return out, nil
}
