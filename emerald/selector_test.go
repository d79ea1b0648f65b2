package emerald

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/jrpc"
)

func heightSel(h *pb.HeightSelector) *pb.Selector {
	return &pb.Selector{SelectorType: &pb.Selector_HeightSelector{HeightSelector: h}}
}

// The height selector becomes the calls' floor; every other selector is
// refused by name.
func TestSelectorFloor(t *testing.T) {
	tests := []struct {
		name    string
		give    *pb.Selector
		want    jrpc.MinHead
		wantErr string
	}{
		{"none", nil, jrpc.MinHead{}, ""},
		{"number", heightSel(&pb.HeightSelector{HeightOrNumber: &pb.HeightSelector_Number{Number: 7}}), jrpc.MinHead{Number: 7}, ""},
		{"latest", heightSel(&pb.HeightSelector{HeightOrNumber: &pb.HeightSelector_Tag{Tag: pb.BlockTag_LATEST}}), jrpc.MinHead{Tag: "latest"}, ""},
		{"safe", heightSel(&pb.HeightSelector{HeightOrNumber: &pb.HeightSelector_Tag{Tag: pb.BlockTag_SAFE}}), jrpc.MinHead{Tag: "safe"}, ""},
		{"finalized", heightSel(&pb.HeightSelector{HeightOrNumber: &pb.HeightSelector_Tag{Tag: pb.BlockTag_FINALIZED}}), jrpc.MinHead{Tag: "finalized"}, ""},
		{"deprecated height", heightSel(&pb.HeightSelector{Height: 9}), jrpc.MinHead{Number: 9}, ""},
		{"deprecated -1: the highest", heightSel(&pb.HeightSelector{Height: -1}), jrpc.MinHead{Tag: "latest"}, ""},
		{"pending", heightSel(&pb.HeightSelector{HeightOrNumber: &pb.HeightSelector_Tag{Tag: pb.BlockTag_PENDING}}), jrpc.MinHead{}, "tag PENDING"},
		{"negative height", heightSel(&pb.HeightSelector{Height: -2}), jrpc.MinHead{}, "height -2"},
		{"label", &pb.Selector{SelectorType: &pb.Selector_LabelSelector{LabelSelector: &pb.LabelSelector{Name: "provider"}}}, jrpc.MinHead{}, "labelSelector"},
		{"and", &pb.Selector{SelectorType: &pb.Selector_AndSelector{AndSelector: &pb.AndSelector{}}}, jrpc.MinHead{}, "andSelector"},
		{"lower height", &pb.Selector{SelectorType: &pb.Selector_LowerHeightSelector{LowerHeightSelector: &pb.LowerHeightSelector{Height: 1}}}, jrpc.MinHead{}, "lower_height_selector"},
		{"slot", &pb.Selector{SelectorType: &pb.Selector_SlotHeightSelector{SlotHeightSelector: &pb.SlotHeightSelector{SlotHeight: 1}}}, jrpc.MinHead{}, "slot_height_selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selectorFloor(tt.give)
			if tt.wantErr != "" {
				if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tt.wantErr) {
					t.Fatalf("err = %v, want INVALID_ARGUMENT naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("floor %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// An item's selectors add to the request's: the highest number and the
// strictest tag.
func TestItemFloorAddsUp(t *testing.T) {
	it := &pb.NativeCallItem{Selectors: []*pb.Selector{
		heightSel(&pb.HeightSelector{HeightOrNumber: &pb.HeightSelector_Number{Number: 5}}),
		heightSel(&pb.HeightSelector{HeightOrNumber: &pb.HeightSelector_Tag{Tag: pb.BlockTag_SAFE}}),
	}}
	if got := itemFloor(jrpc.MinHead{Number: 9, Tag: "finalized"}, it); got != (jrpc.MinHead{Number: 9, Tag: "safe"}) {
		t.Fatalf("floor %+v, want 9 and safe", got)
	}
	if got := itemFloor(jrpc.MinHead{Tag: "latest"}, it); got != (jrpc.MinHead{Number: 5, Tag: "latest"}) {
		t.Fatalf("floor %+v, want 5 and latest", got)
	}
}
