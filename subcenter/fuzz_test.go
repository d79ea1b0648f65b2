package subcenter

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/venn-gateway/venn/jrpc"
)

// FuzzSubscribe feeds eth_subscribe and eth_unsubscribe whatever params a
// client might send: each call either subscribes or returns a JSON-RPC
// error, and a subscription can always be taken back.
func FuzzSubscribe(f *testing.F) {
	for _, s := range []string{
		`["newHeads"]`, `["logs",{}]`, `["logs",{"address":["0x00000000000000000000000000000000000000a1"],"topics":[null,["0x` +
			`00000000000000000000000000000000000000000000000000000000000000f1",null]]}]`,
		`["logs",{"fromBlock":"0x1","toBlock":"latest"}]`, `["syncing"]`, `["newPendingTransactions",true]`,
		`["logs",{"blockHash":"0x12"}]`, `[1]`, `{}`, `null`, `["logs",{"topics":[[],[[]]]}]`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	fe := newFeed(&testing.T{}, 8)
	c := New("fuzz", fe.w, nil, Options{MaxPerConn: 1 << 30}, nil, nil)
	n := newNotifier()
	ctx := ctxFor(n)
	f.Fuzz(func(t *testing.T, params []byte) {
		res, err := c.Subscribe(ctx, params)
		if err != nil {
			var e *jrpc.Error
			if !errors.As(err, &e) {
				t.Fatalf("subscribe %s: %v is not a JSON-RPC error", params, err)
			}
			return
		}
		if _, err := c.Unsubscribe(ctx, json.RawMessage(`[`+string(res)+`]`)); err != nil {
			t.Fatalf("unsubscribe %s: %v", res, err)
		}
		if _, err := c.Unsubscribe(context.Background(), params); err == nil {
			t.Fatalf("unsubscribe over HTTP succeeded")
		}
	})
}
