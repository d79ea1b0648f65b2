package router

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// floorRecorder is remotes at 100 that record each call's params and the
// floor it reached them with.
type floorRecorder struct {
	recorder
	floors []jrpc.MinHead
}

func (r *floorRecorder) ServeCall(ctx context.Context, c evm.Call) (json.RawMessage, error) {
	r.floors = append(r.floors, jrpc.MinHeadOf(ctx))
	return r.recorder.ServeCall(ctx, c)
}

// A call's floor: the head window answers, and pins latest, only when its
// head reaches it; the remotes get it as a number, tags resolved; a tag
// the cluster does not know is a clear -32050.
func TestRouterFloor(t *testing.T) {
	head := fakeHead{tags: headstore.Tags{Latest: 100, Safe: 90}, ok: true}
	tests := []struct {
		name, method, params string
		give                 jrpc.MinHead
		wantSent             string // the params the remotes got; "": none reached them
		wantFloor            uint64 // the floor they got it with
		wantErr              string
	}{
		{"none: the window answers", "eth_blockNumber", `[]`, jrpc.MinHead{}, "", 0, ""},
		{"at the window's head", "eth_blockNumber", `[]`, jrpc.MinHead{Number: 100}, "", 0, ""},
		{"above it: the remotes", "eth_blockNumber", `[]`, jrpc.MinHead{Number: 101}, `[]`, 101, ""},
		{"latest: the remotes' best head", "eth_blockNumber", `[]`, jrpc.MinHead{Tag: "latest"}, "", 0, ""},
		{"safe", "eth_getBalance", `["0xab","latest"]`, jrpc.MinHead{Tag: "safe"}, `["0xab","0x64"]`, 90, ""},
		{"a number above the tag wins", "eth_getBalance", `["0xab","latest"]`, jrpc.MinHead{Number: 95, Tag: "safe"}, `["0xab","0x64"]`, 95, ""},
		{"above the window: latest not pinned", "eth_getBalance", `["0xab","latest"]`, jrpc.MinHead{Number: 101}, `["0xab","latest"]`, 101, ""},
		{"finalized unknown", "eth_getBalance", `["0xab","latest"]`, jrpc.MinHead{Tag: "finalized"}, "", 0, "the chain's finalized block is not known yet"},
		{"local answers ignore it", "eth_chainId", `[]`, jrpc.MinHead{Number: 1000}, "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &floorRecorder{}
			rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5}, head, rec, nil)
			ctx := jrpc.WithMinHead(context.Background(), tt.give)
			_, err := rt.ServeRPC(ctx, &jrpc.Request{Method: tt.method, Params: json.RawMessage(tt.params)})
			if tt.wantErr != "" {
				if e := jrpc.ToWire(err); e == nil || e.Code != jrpc.CodeNoRemote || e.Message != "minimum height finalized: "+tt.wantErr {
					t.Fatalf("err = %v, want -32050 %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantSent == "" && len(rec.sent) != 0:
				t.Fatalf("the remotes got %v, want none", rec.sent)
			case tt.wantSent != "" && (len(rec.sent) != 1 || string(rec.sent[0].Params) != tt.wantSent):
				t.Fatalf("the remotes got %v, want params %s", rec.sent, tt.wantSent)
			case tt.wantSent != "" && rec.floors[0] != jrpc.MinHead{Number: tt.wantFloor}:
				t.Fatalf("the remotes got floor %+v, want %d", rec.floors[0], tt.wantFloor)
			}
		})
	}
}
