package integrity

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
)

// shapeCall is one call to n's handler, in process: its result.
func shapeCall(b *testing.B, n *fakenode.Node, method, params string) json.RawMessage {
	b.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	n.Handler().ServeHTTP(rec, req)
	var reply struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil || len(reply.Result) < 100 {
		b.Fatalf("%s: %v %.200s", method, err, rec.Body.String())
	}
	return reply.Result
}

// BenchmarkVerifyShapeBlock checks the real-sized blocks and receipts of
// the shape bench's chains (vennbench shape): what the leader checks for
// every new head.
func BenchmarkVerifyShapeBlock(b *testing.B) {
	for _, shape := range fakenode.Shapes {
		b.Run(shape.Name, func(b *testing.B) {
			n := fakenode.New(fakenode.Options{ChainID: 1337})
			if _, err := fakenode.NewShapeChain(n, shape); err != nil {
				b.Fatal(err)
			}
			raw := shapeCall(b, n, "eth_getBlockByNumber", `["0x10",true]`)
			rs := shapeCall(b, n, "eth_getBlockReceipts", `["0x10"]`)
			b.SetBytes(int64(len(raw) + len(rs)))
			for b.Loop() {
				v := VerifyBlock(raw, evm.BlockRef{Kind: evm.RefNumber, Number: 16})
				r := VerifyReceipts(rs, evm.BlockRef{Kind: evm.RefNumber, Number: 16}, byHash(v.Block))
				if len(v.Failed)+len(r.Failed) > 0 || !r.Passed.Has(CheckReceiptsRoot) || !v.Passed.Has(CheckTxRoot) {
					b.Fatalf("block %v, receipts %v", v, r)
				}
			}
		})
	}
}
