package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// A chain still at block 0 when venn starts (a fresh geth --dev, a
// simulated backend before its first Commit): every subscriber made then
// is told block 1 when it is mined, and block 2 after it, over each
// transport, and a block filter made then gives them too. venn once took
// head 0 for no head at all, published nothing until block 1, and so
// made block 1 the chain its subscribers start from, telling it to none.
func TestSubscribersAtGenesisGetBlockOne(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	n.SetHead(0)
	g, s := startGRPCServers(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
grpc_listen: 127.0.0.1:0
log: {level: warn}
shutdown_timeout: 5s
chains:
  - name: test
    chain_id: 1337
    grpc_id: 100
    block_time: 200ms
    remotes:
      - {name: n0, url: "`+n.URL()+`"}
`))
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	rpc, metrics := "http://"+s.rpc.bound.String()+"/test", "http://"+s.metrics.bound.String()
	c := dial(t, g, nil)
	ref := pb.ChainRef_CHAIN_ETHEREUM__MAINNET

	// The head stream starts with the head venn has: genesis, once it
	// follows the chain.
	heads, err := c.SubscribeHead(withKey(t, ""), &pb.Chain{Type: ref})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := heads.Recv(); err != nil || h.Height != 0 || "0x"+h.BlockId != n.BlockHash(0) {
		t.Fatalf("SubscribeHead's first head %v (%v), want genesis %s", h, err, n.BlockHash(0))
	}
	// The remote venn fetched genesis from is in rotation, with a head.
	if cr := readyzOf(t, client, metrics); !cr.Ready || len(cr.RemotesOut) > 0 {
		t.Fatalf("readyz at genesis: ready %v, remotes out %+v", cr.Ready, cr.RemotesOut)
	}

	ws := dialWS(t, "ws://"+s.rpc.bound.String()+"/test", nil)
	headsID := wsSubscribe(t, ws, `["newHeads"]`)
	logsID := wsSubscribe(t, ws, `["logs",{}]`)
	native, err := c.NativeSubscribe(withKey(t, ""), &pb.NativeSubscribeRequest{Chain: ref, Method: "newHeads"})
	if err != nil {
		t.Fatal(err)
	}
	var filter string
	if r := post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_newBlockFilter","params":[]}`); r.Error != nil || json.Unmarshal(r.Result, &filter) != nil {
		t.Fatalf("eth_newBlockFilter: %+v", r)
	}
	testkit.WaitFor(t, 10*time.Second, "both newHeads subscriptions in venn", func() bool {
		v, _ := metricValue(t, client, metrics, `venn_subscriptions{chain="test",kind="newHeads"}`)
		return v == 2
	})

	for _, k := range []uint64{1, 2} {
		n.Mine(1)
		want := n.BlockHash(k)
		if h, err := heads.Recv(); err != nil || h.Height != k || "0x"+h.BlockId != want {
			t.Fatalf("SubscribeHead after block %d: %v (%v), want %s", k, h, err, want)
		}
		item := testkit.RecvUntil(t, "NativeSubscribe newHeads", native.Recv,
			func(it *pb.NativeSubscribeReplyItem) bool { return !it.Heartbeat })
		if num, hash := headOf(t, item.Payload); num != k || hash != want {
			t.Fatalf("NativeSubscribe after block %d: head %d %s, want %s", k, num, hash, want)
		}
		// The WebSocket: the head, then the block's two logs.
		var logs int
		for got := false; !got || logs < 2; {
			id, res := wsNotification(t, ws)
			num, hash := headOf(t, res)
			switch {
			case num != k || hash != want:
				t.Fatalf("WebSocket after block %d: %s for %s, want block %s", k, res, id, want)
			case id == headsID && !got:
				got = true
			case id == logsID && got:
				logs++
			default:
				t.Fatalf("WebSocket after block %d: %s for %s, out of turn", k, res, id)
			}
		}
		// Every stream above has the block: the window holds it.
		r := post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_getFilterChanges","params":["`+filter+`"]}`)
		if r.Error != nil || string(r.Result) != `["`+want+`"]` {
			t.Fatalf("eth_getFilterChanges after block %d: %s %+v, want [%s]", k, r.Result, r.Error, want)
		}
	}
}

// wsSubscribe subscribes with params and returns the subscription id.
func wsSubscribe(t *testing.T, c *websocket.Conn, params string) string {
	t.Helper()
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":`+params+`}`)
	var r struct {
		Result string `json:"result"`
	}
	if got := testkit.WSRead(t, c); json.Unmarshal([]byte(got), &r) != nil || !strings.HasPrefix(r.Result, "0x") {
		t.Fatalf("eth_subscribe %s: %s", params, got)
	}
	return r.Result
}

// wsNotification reads one notification: its subscription and result.
func wsNotification(t *testing.T, c *websocket.Conn) (string, json.RawMessage) {
	t.Helper()
	got := testkit.WSRead(t, c)
	var m struct {
		Method string `json:"method"`
		Params struct {
			Subscription string          `json:"subscription"`
			Result       json.RawMessage `json:"result"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(got), &m) != nil || m.Method != "eth_subscription" {
		t.Fatalf("not a notification: %s", got)
	}
	return m.Params.Subscription, m.Params.Result
}

// headOf is the block a head or a log names: its number and hash.
func headOf(t *testing.T, raw json.RawMessage) (uint64, string) {
	t.Helper()
	var b struct {
		Number      string `json:"number"`
		Hash        string `json:"hash"`
		BlockNumber string `json:"blockNumber"`
		BlockHash   string `json:"blockHash"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if b.BlockHash != "" {
		b.Number, b.Hash = b.BlockNumber, b.BlockHash
	}
	num, err := evm.ParseQuantity(b.Number)
	if err != nil {
		t.Fatalf("%s: number %v", raw, err)
	}
	return num, b.Hash
}
