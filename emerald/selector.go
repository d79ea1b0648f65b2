package emerald

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/jrpc"
)

// Selectors: NativeCall's height selector becomes its calls' floor
// (jrpc.MinHead), which the router and the remotes' selection honour: a
// number, or Dshackle's deprecated height (-1: the highest head, as
// latest), or the tags latest, safe and finalized, resolved by the router
// to the cluster's numbers. The request's selector and each item's own
// add up: the highest number and the strictest tag. Every other selector
// is refused by name (INVALID_ARGUMENT), since venn has no equivalent it
// could honour: labels and their combinations (remotes carry a name and a
// tier, no labels), lower_height (venn already sends each call to remotes
// that keep its block's data, by the call's own block), slot heights and
// the pending tag (no slots, no pending head).

// selectorFloor is the floor sel asks for, or the status refusing it.
func selectorFloor(sel *pb.Selector) (jrpc.MinHead, error) {
	if sel == nil || sel.GetSelectorType() == nil {
		return jrpc.MinHead{}, nil
	}
	why := "no selector but height_selector is"
	switch t := sel.GetSelectorType().(type) {
	case *pb.Selector_HeightSelector:
		return heightFloor(t.HeightSelector)
	case *pb.Selector_LabelSelector, *pb.Selector_OrSelector, *pb.Selector_AndSelector,
		*pb.Selector_NotSelector, *pb.Selector_ExistsSelector:
		why = "remotes have a name and a tier, no labels"
	case *pb.Selector_SlotHeightSelector:
		why = "EVM chains have no slots"
	case *pb.Selector_LowerHeightSelector:
		why = "each call already goes to remotes that keep its own block's data"
	}
	name := "selector"
	m := sel.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("selector_type")); fd != nil {
		name = string(fd.Name()) // as the .proto spells it
	}
	return jrpc.MinHead{}, status.Errorf(codes.InvalidArgument, "NativeCall: %s is not served by venn (%s); height_selector is", name, why)
}

// heightFloor is a height selector's floor.
func heightFloor(h *pb.HeightSelector) (jrpc.MinHead, error) {
	switch v := h.GetHeightOrNumber().(type) {
	case *pb.HeightSelector_Number:
		return jrpc.MinHead{Number: v.Number}, nil
	case *pb.HeightSelector_Tag:
		switch v.Tag {
		case pb.BlockTag_LATEST:
			return jrpc.MinHead{Tag: "latest"}, nil
		case pb.BlockTag_SAFE:
			return jrpc.MinHead{Tag: "safe"}, nil
		case pb.BlockTag_FINALIZED:
			return jrpc.MinHead{Tag: "finalized"}, nil
		case pb.BlockTag_UNKNOWN:
			return jrpc.MinHead{}, nil
		}
		return jrpc.MinHead{}, status.Errorf(codes.InvalidArgument, "NativeCall: height_selector tag %s is not served by venn (it tracks no pending head); LATEST, SAFE, FINALIZED and numbers are", v.Tag)
	}
	switch n := h.GetHeight(); {
	case n > 0:
		return jrpc.MinHead{Number: uint64(n)}, nil
	case n == -1: // Dshackle's "the highest head"
		return jrpc.MinHead{Tag: "latest"}, nil
	case n < 0:
		return jrpc.MinHead{}, status.Errorf(codes.InvalidArgument, "NativeCall: height_selector height %d: a block number, or -1 for the highest head", n)
	}
	return jrpc.MinHead{}, nil
}

// tagRank orders floor tags by strictness: latest is above safe, safe
// above finalized.
var tagRank = map[string]int{"": 0, "finalized": 1, "safe": 2, "latest": 3}

// addFloor is the floor that holds both a and b.
func addFloor(a, b jrpc.MinHead) jrpc.MinHead {
	a.Number = max(a.Number, b.Number)
	if tagRank[b.Tag] > tagRank[a.Tag] {
		a.Tag = b.Tag
	}
	return a
}

// itemFloor is item's floor within a request whose selector asks for
// base; selectors were checked by checkRequest.
func itemFloor(base jrpc.MinHead, it *pb.NativeCallItem) jrpc.MinHead {
	for _, sel := range it.GetSelectors() {
		f, _ := selectorFloor(sel)
		base = addFloor(base, f)
	}
	return base
}
