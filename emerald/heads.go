package emerald

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"

	"google.golang.org/grpc"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	rstatus "github.com/venn-gateway/venn/remotes/status"
)

// SubscribeHead streams one ChainHead per head of the chain's shared feed
// (the window newHeads is served from): the current head first, then each
// canonical block as it comes, in order. The first block after a reorg
// carries the reorg's depth (the blocks told that left the chain).
// block_id and parent_block_id are hex without 0x and timestamp is in
// milliseconds, as Dshackle sends them; weight is the total difficulty
// when the node reports one (none after the merge: empty).
// finalization_data has the safe and finalized heights when known, and
// lower_bounds the oldest block any remote in rotation serves, by kind.
func (s *Streams) SubscribeHead(req *pb.Chain, stream grpc.ServerStreamingServer[pb.ChainHead]) error {
	ref := req.GetType()
	ctx := stream.Context()
	ch, err := s.resolve(ctx, ref)
	if err != nil {
		return err
	}
	if err := s.open(ctx, ref); err != nil {
		return err
	}
	w := ch.Window()
	ten := s.tenure(ctx, ref, ch)
	var cur *headstore.Cursor
	for {
		changed := w.Changed()
		v := w.View()
		if len(v.Canon) > 0 {
			heads, next := headsSince(w, v, cur)
			if len(heads) > 0 {
				fin, lb := finalization(v), lowerBounds(ch.Remotes())
				for _, h := range heads {
					h.Chain, h.FinalizationData, h.LowerBounds = ref, fin, lb
					if err := stream.Send(h); err != nil {
						return err
					}
				}
			}
			cur = &next
		}
		select {
		case <-changed:
		case <-ten.table:
			if err := ten.recheck(); err != nil {
				return err
			}
		case <-s.stopping:
			return errStopping
		case <-ctx.Done():
			return endStatus(ctx)
		}
	}
}

// headsSince is the heads a reader at cur (nil: none yet) has not been
// given in view v, and where it stands once given them. A reader whose
// blocks the window no longer knows starts again at the head.
func headsSince(w *headstore.Window, v headstore.View, cur *headstore.Cursor) ([]*pb.ChainHead, headstore.Cursor) {
	top := v.Canon[len(v.Canon)-1]
	restart := func() ([]*pb.ChainHead, headstore.Cursor) {
		return []*pb.ChainHead{chainHead(top)}, headstore.Cursor{Number: top.Number, Hash: top.Hash}
	}
	if cur == nil {
		return restart()
	}
	c, err := w.SinceOn(v.Canon, *cur)
	if errors.Is(err, headstore.ErrOrphanUnknown) {
		return restart()
	}
	if err != nil || len(c.Added) == 0 {
		return nil, *cur
	}
	out := make([]*pb.ChainHead, len(c.Added))
	for i, p := range c.Added {
		out[i] = chainHead(p)
	}
	out[0].Reorg = uint64(len(c.Removed))
	return out, c.Next
}

// chainHead is block p as a ChainHead, without the chain's parts.
func chainHead(p *evm.Parts) *pb.ChainHead {
	return &pb.ChainHead{
		Height:        p.Number,
		BlockId:       strings.TrimPrefix(p.Hash, "0x"),
		ParentBlockId: strings.TrimPrefix(p.Parent, "0x"),
		Timestamp:     p.Time * 1000,
		Weight:        weight(p.HashOnly),
	}
}

// weight is a block's total difficulty, big-endian; nil when the node
// reports none (a chain after the merge).
func weight(block []byte) []byte {
	var b struct {
		TD string `json:"totalDifficulty"`
	}
	if json.Unmarshal(block, &b) != nil || b.TD == "" {
		return nil
	}
	td, ok := new(big.Int).SetString(strings.TrimPrefix(b.TD, "0x"), 16)
	if !ok || td.Sign() == 0 {
		return nil
	}
	return td.Bytes()
}

// finalization is the safe and finalized heights of v, when known.
func finalization(v headstore.View) []*pb.FinalizationData {
	var out []*pb.FinalizationData
	if v.Safe > 0 {
		out = append(out, &pb.FinalizationData{Height: v.Safe, Type: pb.FinalizationType_FINALIZATION_SAFE_BLOCK})
	}
	if v.Finalized > 0 {
		out = append(out, &pb.FinalizationData{Height: v.Finalized, Type: pb.FinalizationType_FINALIZATION_FINALIZED_BLOCK})
	}
	return out
}

// lowerBoundTypes maps venn's kinds of data (remotes/avail) to Dshackle's
// lower bound types.
var lowerBoundTypes = map[string][]pb.LowerBoundType{
	"state":  {pb.LowerBoundType_LOWER_BOUND_STATE},
	"blocks": {pb.LowerBoundType_LOWER_BOUND_BLOCK, pb.LowerBoundType_LOWER_BOUND_TX, pb.LowerBoundType_LOWER_BOUND_RECEIPTS},
	"logs":   {pb.LowerBoundType_LOWER_BOUND_LOGS},
	"traces": {pb.LowerBoundType_LOWER_BOUND_TRACE},
}

// lowerBounds is, for each kind of data, the oldest block any remote in
// rotation serves (0: every block, or none learnt yet), in Dshackle's
// types; none when no remote is in rotation.
func lowerBounds(rs []rstatus.Remote) []*pb.LowerBound {
	oldest := map[string]uint64{}
	var kinds []string
	for _, r := range rs {
		if !r.InRotation {
			continue
		}
		for _, a := range r.Availability {
			o, seen := oldest[a.Kind]
			if !seen {
				kinds = append(kinds, a.Kind)
			}
			if !seen || a.Oldest < o {
				oldest[a.Kind] = a.Oldest
			}
		}
	}
	var out []*pb.LowerBound
	for _, k := range kinds {
		for _, t := range lowerBoundTypes[k] {
			out = append(out, &pb.LowerBound{LowerBoundValue: oldest[k], LowerBoundType: t})
		}
	}
	return out
}
