package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/simnode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// Bounds of the subscription tests.
const (
	// subRounds is how many rounds of two emitter calls the geth --dev
	// test sends, a block or so each.
	subRounds = 6
	// subMaxRounds bounds the rounds that wait for the block range
	// filter's blocks.
	subMaxRounds = 40
	// subSettle bounds the wait for a block to reach every subscriber.
	subSettle = 20 * time.Second
	// subDialTimeout bounds a WebSocket dial and a subscribe.
	subDialTimeout = 10 * time.Second
	// subPrimeAttempts: subPrime mines up to this many blocks.
	subPrimeAttempts = 10
)

// subFilter is one logs subscription's filter, as JSON.
type subFilter struct {
	name string
	raw  string
}

// subLogFilters are the filter shapes the tests subscribe with: none, one
// address, an address list, null positions, OR lists, a combination, a
// block range, and one nothing matches. e0 and e1 are emitters; their
// third topic of LOG3 is the calldata, which the tests set per call.
func subLogFilters(e0, e1 string, from uint64) []subFilter {
	q := strconv.Quote
	t := func(n uint64) string { return q(gethtest.Topic(n)) }
	return []subFilter{
		{"none", `{}`},
		{"address", `{"address":` + q(e0) + `}`},
		{"address list", `{"address":[` + q(e1) + `,` + q(e0) + `]}`},
		{"null position", `{"topics":[null,` + t(0xaa) + `]}`},
		{"OR lists", `{"topics":[[` + t(1) + `,` + t(0xbb) + `],null,[` + t(3) + `,` + t(2) + `,` + t(102) + `,` + t(1004) + `]]}`},
		{"address and topics", `{"address":[` + q(e1) + `],"topics":[` + t(0xbb) + `,[` + t(0xaa) + `],null]}`},
		{"fourth topic", `{"topics":[null,null,null,` + t(4) + `]}`},
		{"block range", `{"address":` + q(e0) + `,"fromBlock":` + q(hex(from)) + `,"toBlock":` + q(hex(from+2)) + `}`},
		{"no match", `{"address":` + q(e1) + `,"topics":[` + t(0x99) + `]}`},
	}
}

// subQueries are the filters ethclient subscribes with, typed.
func subQueries(e0, e1 common.Address) []ethereum.FilterQuery {
	h := func(n int64) common.Hash { return common.BigToHash(big.NewInt(n)) }
	return []ethereum.FilterQuery{
		{},
		{Addresses: []common.Address{e0, e1}, Topics: [][]common.Hash{{h(0xbb), h(1)}, nil, {h(101), h(3)}}},
		{Addresses: []common.Address{e1}, Topics: [][]common.Hash{nil, {h(0xaa)}}},
	}
}

// TestSubscribeEthclientMatchesGeth subscribes go-ethereum's clients to
// newHeads and logs (every filter shape of subLogFilters) through venn's
// WebSocket and straight at geth --dev, which mines a block a second while
// the test calls two emitter contracts. For every block after the
// subscriptions, venn must send what geth sends: the same notification
// results byte for byte (rpc.Client with json.RawMessage), and the same
// typed headers and logs (ethclient). venn's streams hold every block once
// and in order. Over HTTP both refuse eth_subscribe the same way.
func TestSubscribeEthclientMatchesGeth(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{Period: time.Second})
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	if len(accounts) == 0 {
		t.Fatal("geth --dev has no dev account")
	}
	dev := accounts[0]
	var emitters [2]string
	for i := range emitters {
		rc := waitReceipt(t, g, gethtest.Send(t, g, map[string]any{"from": dev, "data": gethtest.EmitterCode()}))
		emitters[i] = rc.ContractAddress
	}
	v := startVenn(t, []*gethtest.Geth{g}, vennOptions{})

	subHTTPRefused(t, v.URL(chainName), g.HTTPURL())

	// The block range filter covers three blocks of the rounds below: far
	// enough ahead that a slow setup does not pass them, and the rounds go
	// on until they are mined.
	from := quantity(t, g.MustCall(t, "eth_blockNumber")) + 10
	filters := subLogFilters(emitters[0], emitters[1], from)
	queries := subQueries(common.HexToAddress(emitters[0]), common.HexToAddress(emitters[1]))
	vs := subOpen(t, "venn", v.WSURL(chainName), filters, queries)
	gs := subOpen(t, "geth", g.WSURL(), filters, queries)
	subPrime(t, vs, nil)
	// geth's subscriptions were there before start+1 was mined, and venn
	// sends every block after its first.
	start := quantity(t, g.MustCall(t, "eth_blockNumber"))

	var last uint64
	for r := uint64(1); r <= subRounds || last < from+2; r++ {
		if r > subMaxRounds {
			t.Fatalf("%d rounds mined up to block %d, short of the block range filter's %d", subMaxRounds, last, from+2)
		}
		txs := []string{
			gethtest.Send(t, g, map[string]any{"from": dev, "to": emitters[0], "data": gethtest.Topic(r)}),
			gethtest.Send(t, g, map[string]any{"from": dev, "to": emitters[1], "data": gethtest.Topic(100 + r)}),
		}
		for _, tx := range txs {
			last = max(last, quantity(t, waitReceipt(t, g, tx).BlockNumber))
		}
	}
	// One block past the last transaction: an empty one is compared too.
	end := last + 1
	for _, s := range []*subSide{vs, gs} {
		if !testkit.Poll(subSettle, func() bool {
			heads, _ := s.heads.list()
			return len(heads) > 0 && subParse(t, heads[len(heads)-1]).block() > end
		}) {
			t.Fatalf("%s: no head above %d within %v", s.name, end, subSettle)
		}
	}

	// Notifications still on their way through the clients settle
	// within moments; a difference that stays is a failure.
	var diffs []error
	testkit.Poll(5*time.Second, func() bool {
		diffs = subCompareLive(t, vs, gs, start+1, end)
		return len(diffs) == 0
	})
	for _, err := range diffs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// venn's own streams, whole: every block once, in order, no reorg.
	heads, err := vs.heads.list()
	if err != nil {
		t.Fatalf("venn newHeads: %v", err)
	}
	subCheckHeads(t, "venn newHeads", heads)
	for i, f := range filters {
		logs, err := vs.logs[i].list()
		if err != nil {
			t.Fatalf("venn logs %s: %v", f.name, err)
		}
		subCheckLogOrder(t, "venn logs "+f.name, logs)
		inRange := subInRange(t, logs, start+1, end)
		if f.name != "no match" && len(inRange) == 0 {
			t.Errorf("venn logs %s: nothing delivered for blocks %d-%d; the filter is meant to match", f.name, start+1, end)
		}
		if f.name == "none" {
			// Nothing missed by both: the logs geth has for the range.
			var want []json.RawMessage
			mustUnmarshal(t, g.MustCall(t, "eth_getLogs", map[string]any{"fromBlock": hex(start + 1), "toBlock": hex(end)}), &want)
			if err := subSame(want, inRange); err != nil {
				t.Errorf("venn logs none against geth's eth_getLogs for %d-%d: %v", start+1, end, err)
			}
		}
	}
	t.Logf("blocks %d-%d: %d heads and %d logs (unfiltered) from venn as geth sent them, over %d raw and %d typed logs subscriptions",
		start+1, end, len(subInRange(t, heads, start+1, end)), subCount(t, vs.logs[0], start+1, end), len(filters), len(queries))
}

// subHTTPRefused: eth_subscribe (and eth_unsubscribe) over HTTP get the
// same answer from venn as from geth: "notifications not supported".
func subHTTPRefused(t *testing.T, vennURL, gethURL string) {
	t.Helper()
	for _, tc := range []struct{ method, params string }{
		{"eth_subscribe", `["newHeads"]`},
		{"eth_subscribe", `["logs",{}]`},
		{"eth_unsubscribe", `["0x1"]`},
	} {
		body := []byte(`{"jsonrpc":"2.0","id":7,"method":"` + tc.method + `","params":` + tc.params + `}`)
		var answers [2]string
		for i, url := range []string{gethURL, vennURL} {
			status, out, err := post(url, body)
			if err != nil || status != http.StatusOK {
				t.Fatalf("%s %s over HTTP to %s: HTTP %d %v", tc.method, tc.params, url, status, err)
			}
			if answers[i], err = normalize(out); err != nil {
				t.Fatal(err)
			}
		}
		if answers[0] != answers[1] {
			t.Errorf("%s %s over HTTP: venn answered %s, geth %s", tc.method, tc.params, answers[1], answers[0])
		}
		if tc.method == "eth_subscribe" && !strings.Contains(answers[1], `{"code":-32601,"message":"notifications not supported"}`) {
			t.Errorf("%s %s over HTTP: venn answered %s, want -32601 notifications not supported", tc.method, tc.params, answers[1])
		}
	}
}

// TestSubscribeReorgsMatchSimulatedNode puts venn in front of go-ethereum's
// simulated backend, served over HTTP and WebSocket, and subscribes to
// newHeads and logs on venn and on the node itself while the test makes
// reorgs with Fork: depth 1, depth 3, and depth 2 with a new branch
// that carries logs the old one never had (calldata, so topics, no
// earlier call used). Every block calls the emitters, so every reorg
// removes logs; the dropped blocks' transactions go back to the node's
// pool and come back in the new branch's first block, their logs now in
// another block and at other indexes.
//
// The two streams differ in one way only, and the test allows exactly
// that. Fork sets the node's head back to the fork point at once
// (BlockChain.SetCanonical), and geth then announces the fork point again:
// its header on newHeads and its logs (not removed) on logs, a block the
// subscriber already had. venn never sees the node's head go back: it
// follows the longest chain, so it sees the reorg when the new branch
// outgrows the old one, and sends the logs of the dropped blocks with
// removed: true, then the new branch's heads and logs, each block once.
// geth sends the same removed logs at the Fork, and the new branch's heads
// and logs block by block as Commit seals them. So, with the fork point's
// repeated header and logs taken out of geth's streams (and each one
// checked to be exactly that), venn's and geth's streams must be equal
// notification for notification, byte for byte.
func TestSubscribeReorgsMatchSimulatedNode(t *testing.T) {
	sim := simnode.Start(t)
	code := common.FromHex(gethtest.EmitterCode())
	e0, e1 := sim.Deploy(t, code), sim.Deploy(t, code)
	v := startVenn(t, nil, vennOptions{blockTime: "200ms", urls: [][2]string{{sim.HTTPURL(), sim.WSURL()}}})

	lower := func(a common.Address) string { return strings.ToLower(a.Hex()) }
	filters := subLogFilters(lower(e0), lower(e1), 0)
	filters = filters[:len(filters)-2] // a block range and no match add nothing here
	vs := subOpen(t, "venn", v.WSURL(chainName), filters, nil)
	ns := subOpen(t, "node", sim.WSURL(), filters, nil)
	subPrime(t, vs, func() { sim.Commit() })

	k := uint64(0)
	// block seals a block calling each of to with fresh calldata.
	block := func(to ...common.Address) {
		for _, a := range to {
			k++
			sim.Send(t, a, common.FromHex(gethtest.Topic(k)))
		}
		sim.Commit()
	}
	caughtUp := func() {
		t.Helper()
		head := sim.Head(t).Hash().Hex()
		if !testkit.Poll(subSettle, func() bool {
			heads, _ := vs.heads.list()
			return len(heads) > 0 && subParse(t, heads[len(heads)-1]).Hash == head
		}) {
			t.Fatalf("venn's newHeads did not reach the node's head %s within %v", head, subSettle)
		}
	}
	var forks []string // fork points' hashes
	fork := func(depth uint64) {
		t.Helper()
		head := sim.Head(t)
		parent, err := sim.Client().HeaderByNumber(context.Background(), new(big.Int).SetUint64(head.Number.Uint64()-depth))
		if err != nil {
			t.Fatal(err)
		}
		// filters[0] takes every log: the dropped blocks' logs are
		// what the Fork removes.
		want := subRemovedCount(t, ns.logs[0]) + subLiveAbove(t, ns.logs[0], parent.Number.Uint64())
		sim.Fork(t, parent.Hash())
		forks = append(forks, parent.Hash().Hex())
		// The node's filter system handles one chain event at a time:
		// once the removed logs are out, the next block's logs follow
		// them on every subscription.
		if !testkit.Poll(subSettle, func() bool { return subRemovedCount(t, ns.logs[0]) >= want }) {
			t.Fatalf("the node sent %d removed logs after a fork at %d, want %d",
				subRemovedCount(t, ns.logs[0]), parent.Number, want)
		}
	}

	caughtUp()
	// Both sides send every block above h0: the node's subscriptions
	// were there before it, and venn has caught up to it.
	h0 := sim.Head(t).Number.Uint64()
	for range 3 {
		block(e0, e1)
	}
	caughtUp()
	// Depth 1: the dropped block's calls come back in the new branch.
	fork(1)
	block()
	block(e0)
	caughtUp()
	// Depth 3.
	fork(3)
	block()
	block(e1)
	block(e0, e1)
	block(e1)
	caughtUp()
	// Depth 2, and a new branch with logs the old one lacked: calls of
	// e1 only, with calldata no earlier call used.
	fork(2)
	k = 1000
	block(e1, e1)
	block(e1)
	block(e1)
	caughtUp()
	block(e0, e1)
	caughtUp()
	top := sim.Head(t).Number.Uint64()

	var diffs []error
	testkit.Poll(5*time.Second, func() bool {
		diffs = subCompareReorgs(t, vs, ns, h0, forks)
		return len(diffs) == 0
	})
	for _, err := range diffs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// venn's streams, whole: each block once on the chain it ends on,
	// removals only of logs it sent, and what is left is the node's.
	heads, _ := vs.heads.list()
	canon := subCheckReorgHeads(t, "venn newHeads", subInRange(t, heads, h0+1, top))
	for n := h0 + 1; n <= top; n++ {
		h, err := sim.Client().HeaderByNumber(context.Background(), new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		if canon[n] != h.Hash().Hex() {
			t.Errorf("venn newHeads left block %d at %s, the node's chain has %s", n, canon[n], h.Hash().Hex())
		}
	}
	removed := 0
	for i, f := range filters {
		logs, _ := vs.logs[i].list()
		live, rm := subReplayLogs(t, "venn logs "+f.name, subInRange(t, logs, h0+1, top))
		removed += rm
		var q map[string]any
		mustUnmarshal(t, json.RawMessage(f.raw), &q)
		q["fromBlock"], q["toBlock"] = hex(h0+1), hex(top)
		var want []json.RawMessage
		if err := subCall(sim.HTTPURL(), &want, "eth_getLogs", q); err != nil {
			t.Fatal(err)
		}
		if err := subSame(want, live); err != nil {
			t.Errorf("venn logs %s: what is left after the removals is not the node's eth_getLogs: %v", f.name, err)
		}
	}
	if removed == 0 {
		t.Error("no removed logs: the reorgs removed nothing")
	}
	t.Logf("blocks %d-%d, %d reorgs: venn's %d heads and %d logs notifications (%d removed) equal the node's, less its fork point echoes",
		h0+1, top, len(forks), len(subInRange(t, heads, h0+1, top)), subCount(t, vs.logs[0], h0+1, top), removed)
}

// subPrime waits for the first head on s's newHeads, calling mine (when
// the chain does not move by itself) until one comes. Until then venn's
// dispatcher has no chain to compare with: the first window it loads is
// where its subscribers start, not blocks they are sent. From the first
// head on, every block reaches them.
func subPrime(t *testing.T, s *subSide, mine func()) {
	t.Helper()
	for range subPrimeAttempts {
		if mine != nil {
			mine()
		}
		if testkit.Poll(subSettle/subPrimeAttempts, func() bool {
			heads, _ := s.heads.list()
			return len(heads) > 0
		}) {
			return
		}
	}
	t.Fatalf("%s: no first head within %v", s.name, subSettle)
}

// subCall makes one JSON-RPC call over HTTP and decodes the result into out.
func subCall(url string, out any, method string, params ...any) error {
	res, err := tryCall(url, method, params...)
	if err != nil {
		return err
	}
	return json.Unmarshal(res, out)
}

// subSide is one endpoint's subscriptions: raw (rpc.Client, results as
// sent) and typed (ethclient).
type subSide struct {
	name   string
	heads  *subNotes[json.RawMessage]
	logs   []*subNotes[json.RawMessage] // by filter
	tHeads *subNotes[*types.Header]     // nil without queries
	tLogs  []*subNotes[types.Log]       // by query
}

// subOpen subscribes at url, a WebSocket endpoint: raw newHeads and logs
// with each filter on one connection; with queries, ethclient's newHeads
// and logs with each query on another.
func subOpen(t *testing.T, name, url string, filters []subFilter, queries []ethereum.FilterQuery) *subSide {
	t.Helper()
	s := &subSide{name: name}
	c := subDial(t, url)
	s.heads = subRaw(t, c, name+" newHeads", "newHeads")
	for _, f := range filters {
		s.logs = append(s.logs, subRaw(t, c, name+" logs "+f.name, "logs", json.RawMessage(f.raw)))
	}
	if len(queries) == 0 {
		return s
	}
	ec := ethclient.NewClient(subDial(t, url))
	ctx, cancel := context.WithTimeout(context.Background(), subDialTimeout)
	defer cancel()
	hch := make(chan *types.Header, 64)
	hsub, err := ec.SubscribeNewHead(ctx, hch)
	if err != nil {
		t.Fatalf("%s: ethclient SubscribeNewHead: %v", name, err)
	}
	s.tHeads = subFollow(t, hsub, hch)
	for i, q := range queries {
		lch := make(chan types.Log, 64)
		lsub, err := ec.SubscribeFilterLogs(ctx, q, lch)
		if err != nil {
			t.Fatalf("%s: ethclient SubscribeFilterLogs #%d: %v", name, i, err)
		}
		s.tLogs = append(s.tLogs, subFollow(t, lsub, lch))
	}
	return s
}

// subDial connects an rpc.Client to url; it is closed when the test ends,
// after the subscriptions on it.
func subDial(t *testing.T, url string) *rpc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), subDialTimeout)
	defer cancel()
	c, err := rpc.DialContext(ctx, url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(c.Close)
	return c
}

// subRaw subscribes with args and keeps each notification's result as sent.
func subRaw(t *testing.T, c *rpc.Client, name string, args ...any) *subNotes[json.RawMessage] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), subDialTimeout)
	defer cancel()
	ch := make(chan json.RawMessage, 64)
	sub, err := c.EthSubscribe(ctx, ch, args...)
	if err != nil {
		t.Fatalf("%s: eth_subscribe: %v", name, err)
	}
	return subFollow(t, sub, ch)
}

// subNotes is one subscription's notifications in arrival order, and the
// error that ended it, if one did.
type subNotes[T any] struct {
	mu  sync.Mutex
	got []T
	err error
}

// list returns what arrived so far.
func (n *subNotes[T]) list() ([]T, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]T(nil), n.got...), n.err
}

// subFollow collects what sub delivers on ch until the test ends, when it
// unsubscribes.
func subFollow[T any](t *testing.T, sub ethereum.Subscription, ch <-chan T) *subNotes[T] {
	n := &subNotes[T]{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case v := <-ch:
				n.mu.Lock()
				n.got = append(n.got, v)
				n.mu.Unlock()
			case err := <-sub.Err():
				n.mu.Lock()
				n.err = cmp.Or(err, errors.New("subscription ended"))
				n.mu.Unlock()
				return
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		sub.Unsubscribe()
	})
	return n
}

// subItem is what the checks read of a notification: a head's number and
// hashes, or a log's block and place in it.
type subItem struct {
	Number      string `json:"number"`
	Hash        string `json:"hash"`
	ParentHash  string `json:"parentHash"`
	BlockNumber string `json:"blockNumber"`
	BlockHash   string `json:"blockHash"`
	LogIndex    string `json:"logIndex"`
	Removed     bool   `json:"removed"`
}

func subParse(t *testing.T, raw json.RawMessage) subItem {
	t.Helper()
	var it subItem
	mustUnmarshal(t, raw, &it)
	return it
}

// block is the item's block number.
func (it subItem) block() uint64 {
	s := it.Number
	if s == "" {
		s = it.BlockNumber
	}
	n, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	return n
}

// index is a log's index in its block.
func (it subItem) index() uint64 {
	n, _ := strconv.ParseUint(strings.TrimPrefix(it.LogIndex, "0x"), 16, 64)
	return n
}

// key names a log: its block's hash and its index.
func (it subItem) key() string { return it.BlockHash + "/" + it.LogIndex }

// subInRange keeps the notifications of blocks from..to.
func subInRange(t *testing.T, list []json.RawMessage, from, to uint64) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, raw := range list {
		if n := subParse(t, raw).block(); n >= from && n <= to {
			out = append(out, raw)
		}
	}
	return out
}

func subCount(t *testing.T, n *subNotes[json.RawMessage], from, to uint64) int {
	list, _ := n.list()
	return len(subInRange(t, list, from, to))
}

// subSame reports the first difference between two notification streams.
func subSame(want, got []json.RawMessage) error {
	for i := range min(len(want), len(got)) {
		if !bytes.Equal(want[i], got[i]) {
			return fmt.Errorf("notification %d of %d differs:\nvenn %s\nnode %s", i, len(want), truncate(string(got[i])), truncate(string(want[i])))
		}
	}
	switch {
	case len(got) > len(want):
		return fmt.Errorf("%d notifications, the node sent %d; the first extra: %s", len(got), len(want), truncate(string(got[len(want)])))
	case len(got) < len(want):
		return fmt.Errorf("%d notifications, the node sent %d; the first missing: %s", len(got), len(want), truncate(string(want[len(got)])))
	}
	return nil
}

// subCompareLive compares venn's and geth's streams for blocks from..to,
// raw and typed.
func subCompareLive(t *testing.T, vs, gs *subSide, from, to uint64) []error {
	var errs []error
	check := func(what string, v, g *subNotes[json.RawMessage]) {
		vl, verr := v.list()
		gl, gerr := g.list()
		if err := errors.Join(verr, gerr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			return
		}
		if err := subSame(subInRange(t, gl, from, to), subInRange(t, vl, from, to)); err != nil {
			errs = append(errs, fmt.Errorf("%s, blocks %d-%d: %w", what, from, to, err))
		}
	}
	check("newHeads", vs.heads, gs.heads)
	for i := range vs.logs {
		check(fmt.Sprintf("logs filter #%d", i), vs.logs[i], gs.logs[i])
	}

	vh, verr := vs.tHeads.list()
	gh, gerr := gs.tHeads.list()
	inRange := func(hs []*types.Header) []*types.Header {
		var out []*types.Header
		for _, h := range hs {
			if n := h.Number.Uint64(); n >= from && n <= to {
				out = append(out, h)
			}
		}
		return out
	}
	if err := errors.Join(verr, gerr); err != nil {
		errs = append(errs, fmt.Errorf("ethclient SubscribeNewHead: %w", err))
	} else if v, g := inRange(vh), inRange(gh); !reflect.DeepEqual(v, g) || len(v) == 0 {
		errs = append(errs, fmt.Errorf("ethclient SubscribeNewHead, blocks %d-%d: venn %d headers, geth %d, or they differ", from, to, len(v), len(g)))
	}
	for i := range vs.tLogs {
		vl, verr := vs.tLogs[i].list()
		gl, gerr := gs.tLogs[i].list()
		logsIn := func(ls []types.Log) []types.Log {
			var out []types.Log
			for _, l := range ls {
				if l.BlockNumber >= from && l.BlockNumber <= to {
					out = append(out, l)
				}
			}
			return out
		}
		if err := errors.Join(verr, gerr); err != nil {
			errs = append(errs, fmt.Errorf("ethclient SubscribeFilterLogs #%d: %w", i, err))
		} else if v, g := logsIn(vl), logsIn(gl); !reflect.DeepEqual(v, g) || len(v) == 0 {
			errs = append(errs, fmt.Errorf("ethclient SubscribeFilterLogs #%d, blocks %d-%d: venn %d logs, geth %d, or they differ", i, from, to, len(v), len(g)))
		}
	}
	return errs
}

// subCheckHeads: each head is the child of the one before it.
func subCheckHeads(t *testing.T, what string, heads []json.RawMessage) {
	t.Helper()
	for i := 1; i < len(heads); i++ {
		prev, cur := subParse(t, heads[i-1]), subParse(t, heads[i])
		if cur.block() != prev.block()+1 || cur.ParentHash != prev.Hash {
			t.Errorf("%s: head %d (%s, parent %s) after %d (%s): want each block once, in order",
				what, cur.block(), cur.Hash, cur.ParentHash, prev.block(), prev.Hash)
		}
	}
}

// subCheckLogOrder: no log is removed, and each comes after the one before
// it, by block and index.
func subCheckLogOrder(t *testing.T, what string, logs []json.RawMessage) {
	t.Helper()
	var prevBlock, prevIndex uint64
	for i, raw := range logs {
		it := subParse(t, raw)
		idx := it.index()
		if it.Removed {
			t.Errorf("%s: a removed log on a chain without reorgs: %s", what, raw)
		}
		if i > 0 && (it.block() < prevBlock || it.block() == prevBlock && idx <= prevIndex) {
			t.Errorf("%s: log %d/%d after %d/%d: want each once, in order", what, it.block(), idx, prevBlock, prevIndex)
		}
		prevBlock, prevIndex = it.block(), idx
	}
}

// subCompareReorgs compares venn's streams with the node's from block
// from+1 on, once the node's fork point echoes are out (see
// TestSubscribeReorgsMatchSimulatedNode).
func subCompareReorgs(t *testing.T, vs, ns *subSide, h0 uint64, forks []string) []error {
	var errs []error
	const top = 1<<63 - 1
	vh, verr := vs.heads.list()
	nh, nerr := ns.heads.list()
	if err := errors.Join(verr, nerr); err != nil {
		return []error{fmt.Errorf("newHeads: %w", err)}
	}
	want, echoes := subDropHeadEchoes(t, subInRange(t, nh, h0+1, top), forks)
	if echoes != len(forks) {
		errs = append(errs, fmt.Errorf("newHeads: the node repeated %d fork points, want %d (one per Fork)", echoes, len(forks)))
	}
	if err := subSame(want, subInRange(t, vh, h0+1, top)); err != nil {
		errs = append(errs, fmt.Errorf("newHeads: %w", err))
	}
	for i := range vs.logs {
		vl, verr := vs.logs[i].list()
		nl, nerr := ns.logs[i].list()
		if err := errors.Join(verr, nerr); err != nil {
			errs = append(errs, fmt.Errorf("logs filter #%d: %w", i, err))
			continue
		}
		want, err := subDropLogEchoes(t, subInRange(t, nl, h0+1, top), forks)
		if err != nil {
			errs = append(errs, fmt.Errorf("logs filter #%d: %w", i, err))
		}
		if err := subSame(want, subInRange(t, vl, h0+1, top)); err != nil {
			errs = append(errs, fmt.Errorf("logs filter #%d: %w", i, err))
		}
	}
	return errs
}

// subDropHeadEchoes takes out of the node's heads the ones it had sent
// before, and counts them; each must be a fork point.
func subDropHeadEchoes(t *testing.T, heads []json.RawMessage, forks []string) ([]json.RawMessage, int) {
	seen := map[string]bool{}
	var out []json.RawMessage
	echoes := 0
	for _, raw := range heads {
		h := subParse(t, raw).Hash
		if seen[h] && slices.Contains(forks, h) {
			echoes++
			continue
		}
		seen[h] = true
		out = append(out, raw)
	}
	return out, echoes
}

// subDropLogEchoes takes out of the node's logs the ones sent again while
// still on the chain: the fork point's, and nothing else.
func subDropLogEchoes(t *testing.T, logs []json.RawMessage, forks []string) ([]json.RawMessage, error) {
	live := map[string]bool{}
	var out []json.RawMessage
	for _, raw := range logs {
		it := subParse(t, raw)
		switch {
		case it.Removed:
			delete(live, it.key())
		case live[it.key()]:
			if !slices.Contains(forks, it.BlockHash) {
				return nil, fmt.Errorf("the node sent log %s again, and its block is no fork point", it.key())
			}
			continue
		default:
			live[it.key()] = true
		}
		out = append(out, raw)
	}
	return out, nil
}

// subRemovedCount is how many removed logs n holds.
func subRemovedCount(t *testing.T, n *subNotes[json.RawMessage]) int {
	list, _ := n.list()
	c := 0
	for _, raw := range list {
		if subParse(t, raw).Removed {
			c++
		}
	}
	return c
}

// subLiveAbove is how many logs of blocks above number n holds that no
// removal took back.
func subLiveAbove(t *testing.T, n *subNotes[json.RawMessage], number uint64) int {
	list, _ := n.list()
	live := map[string]uint64{}
	for _, raw := range list {
		it := subParse(t, raw)
		if it.Removed {
			delete(live, it.key())
		} else {
			live[it.key()] = it.block()
		}
	}
	c := 0
	for _, b := range live {
		if b > number {
			c++
		}
	}
	return c
}

// subCheckReorgHeads follows a newHeads stream with reorgs: each head is
// the child of the delivered head one below it, on the chain as it stands.
// It returns that chain, by number.
func subCheckReorgHeads(t *testing.T, what string, heads []json.RawMessage) map[uint64]string {
	t.Helper()
	canon := map[uint64]string{}
	var top uint64
	for i, raw := range heads {
		it := subParse(t, raw)
		n := it.block()
		if i > 0 {
			if n > top+1 || canon[n-1] != it.ParentHash {
				t.Errorf("%s: head %d (%s) has parent %s, the chain so far has %s at %d (top %d)",
					what, n, it.Hash, it.ParentHash, canon[n-1], n-1, top)
			}
			if canon[n] == it.Hash {
				t.Errorf("%s: head %d (%s) sent twice", what, n, it.Hash)
			}
		}
		for m := n + 1; m <= top; m++ {
			delete(canon, m)
		}
		canon[n], top = it.Hash, n
	}
	return canon
}

// subReplayLogs follows a logs stream with reorgs: a removed log must be
// one sent before and still live (the same object, removed: true), in
// ascending order within its run of removals; a log must not be live
// already. It returns what is left, in order, and how many were removed.
func subReplayLogs(t *testing.T, what string, logs []json.RawMessage) ([]json.RawMessage, int) {
	t.Helper()
	var live []json.RawMessage
	removed := 0
	var prev *subItem
	for _, raw := range logs {
		it := subParse(t, raw)
		i := -1
		for j, l := range live {
			if subParse(t, l).key() == it.key() {
				i = j
			}
		}
		if !it.Removed {
			if i >= 0 {
				t.Errorf("%s: log %s sent twice", what, it.key())
			}
			live = append(live, raw)
			prev = nil
			continue
		}
		removed++
		if i < 0 {
			t.Errorf("%s: removed log %s was never sent, or is removed twice", what, it.key())
			continue
		}
		if !bytes.Equal(bytes.Replace(raw, []byte(`"removed":true`), []byte(`"removed":false`), 1), live[i]) {
			t.Errorf("%s: removed log %s is not the log sent:\nremoved %s\nsent    %s", what, it.key(), raw, live[i])
		}
		if prev != nil && (it.block() < prev.block() || it.block() == prev.block() && it.index() <= prev.index()) {
			t.Errorf("%s: removed log %s after %s: want ascending order", what, it.key(), prev.key())
		}
		prev = &it
		live = append(live[:i], live[i+1:]...)
	}
	return live, removed
}
