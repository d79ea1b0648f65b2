package subcenter

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/eth/filters"

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
	f.Cleanup(c.Stop)
	n := newNotifier()
	ctx := ctxFor(n)
	f.Fuzz(func(t *testing.T, params []byte) {
		res, err := c.Subscribe(ctx, params)
		if err != nil {
			if e := jrpc.ToWire(err); e.Code == jrpc.CodeInternal && e.Message == "internal error" {
				t.Fatalf("subscribe %s: %v is no refusal of venn's own", params, err)
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

// FuzzLogFilter holds the logs filter reader to geth's own
// (eth/filters.FilterCriteria): a filter venn takes, geth takes, with the
// same addresses and topics, and within the limits; a filter geth's
// reader refuses, venn refuses. venn also refuses, as geth's subscription
// does after reading, pending logs and backward or open-ended ranges.
func FuzzLogFilter(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"address":"0x00000000000000000000000000000000000000a1"}`,
		`{"address":["0x00000000000000000000000000000000000000A1","0x00000000000000000000000000000000000000a2"]}`,
		`{"address":["0x01","0x02","0x03","0x04"]}`, `{"address":[1]}`, `{"address":{}}`,
		`{"topics":[null,["0x00000000000000000000000000000000000000000000000000000000000000f1",null]]}`,
		`{"topics":[[],[[]]]}`, `{"topics":[null,null,null,null,null]}`, `{"topics":["0x1"]}`,
		`{"topics":[["0x00000000000000000000000000000000000000000000000000000000000000f1","0x00000000000000000000000000000000000000000000000000000000000000f2","0x00000000000000000000000000000000000000000000000000000000000000f3","0x00000000000000000000000000000000000000000000000000000000000000f4"]]}`,
		`{"fromBlock":"0x1","toBlock":"latest"}`, `{"fromBlock":"pending"}`, `{"fromBlock":"0x5","toBlock":"0x4"}`,
		`{"blockHash":"0x00000000000000000000000000000000000000000000000000000000000000f1"}`,
		`{"blockHash":"0x00000000000000000000000000000000000000000000000000000000000000f1","fromBlock":"0x1"}`,
	} {
		f.Add([]byte(s))
	}
	lim := filterLimits{addresses: 3, topics: 3}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := parseLogFilter(raw, lim)
		var geth filters.FilterCriteria
		gerr := json.Unmarshal(raw, &geth)
		var le *limitError
		switch {
		case errors.As(err, &le):
			if gerr == nil && len(geth.Addresses) <= lim.addresses && !slices.ContainsFunc(geth.Topics,
				func(alts []common.Hash) bool { return len(alts) > lim.topics }) {
				t.Fatalf("%s: %v, but geth reads %d addresses and topics %v", raw, err, len(geth.Addresses), geth.Topics)
			}
			return
		case gerr != nil:
			if err == nil {
				t.Fatalf("%s: venn takes a filter geth refuses: %v", raw, gerr)
			}
			return
		case err != nil:
			for _, after := range []string{"pending logs are not supported", "invalid block range params", "block number larger than int64"} {
				if err.Error() == after {
					return
				}
			}
			t.Fatalf("%s: venn refuses (%v) a filter geth takes", raw, err)
		}
		if len(got.addrs) > lim.addresses {
			t.Fatalf("%s: %d addresses taken, the limit is %d", raw, len(got.addrs), lim.addresses)
		}
		var addrs []string
		for _, a := range geth.Addresses {
			addrs = append(addrs, strings.ToLower(a.Hex()))
		}
		if !slices.Equal(got.addrs, addrs) {
			t.Fatalf("%s: addresses %v, geth's %v", raw, got.addrs, addrs)
		}
		if len(got.topics) != len(geth.Topics) {
			t.Fatalf("%s: %d topic positions, geth's %d", raw, len(got.topics), len(geth.Topics))
		}
		for i, alts := range geth.Topics {
			var want []string
			for _, h := range alts {
				want = append(want, h.Hex())
			}
			var alts []string
			for v := range got.topics[i].Values() {
				alts = append(alts, string(v))
			}
			if len(alts) > lim.topics || !slices.Equal(alts, want) || got.topics[i].Any() != (len(alts) == 0) {
				t.Fatalf("%s: topics at %d %v, geth's %v", raw, i, alts, want)
			}
		}
	})
}
