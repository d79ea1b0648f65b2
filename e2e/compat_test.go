package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// wsTimeout bounds the whole WebSocket exchange of TestSameAnswersAsGeth.
const wsTimeout = 20 * time.Second

// compareMode says how venn's answer is held against geth's.
type compareMode int

const (
	// exact: the same JSON document, once both are normalised.
	exact compareMode = iota
	// blockNumber: venn's eth_blockNumber may trail geth's (geth is asked
	// second) but equals it while the chain stands still.
	blockNumber
	// latestBlock: venn's "latest" block is no older than the fixture's head
	// and no newer than geth's; the same block must be the same document.
	latestBlock
	// alreadyKnown: the transaction is already in geth's pool, so geth now
	// says "already known"; venn must answer its hash, as geth did the first
	// time.
	alreadyKnown
)

// compatCase is one call sent to venn and to geth.
type compatCase struct {
	name   string
	method string
	params string // raw JSON array
	mode   compareMode
}

func compatCases(c devChain) []compatCase {
	q := strconv.Quote
	pad := func(addr string) string { return q("0x000000000000000000000000" + strings.TrimPrefix(addr, "0x")) }
	topic1 := q("0x0000000000000000000000000000000000000000000000000000000000000001")
	topic2 := q("0x0000000000000000000000000000000000000000000000000000000000000002")
	return []compatCase{
		{name: "chainId", method: "eth_chainId", params: `[]`},
		{name: "net_version", method: "net_version", params: `[]`},
		{name: "blockNumber", method: "eth_blockNumber", params: `[]`, mode: blockNumber},
		{name: "block full", method: "eth_getBlockByNumber", params: `[` + q(hex(c.deployBlock)) + `,true]`},
		{name: "block hashes", method: "eth_getBlockByNumber", params: `[` + q(hex(c.deployBlock)) + `,false]`},
		{name: "block latest", method: "eth_getBlockByNumber", params: `["latest",false]`, mode: latestBlock},
		{name: "block above head", method: "eth_getBlockByNumber", params: `["0x99",false]`},
		{name: "block by hash", method: "eth_getBlockByHash", params: `[` + q(c.callBlockHash) + `,true]`},
		{name: "balance at a block", method: "eth_getBalance", params: `[` + q(c.account) + `,` + q(hex(c.deployBlock)) + `]`},
		{name: "code", method: "eth_getCode", params: `[` + q(c.contract) + `,` + q(hex(c.callBlock)) + `]`},
		{name: "storage", method: "eth_getStorageAt", params: `[` + q(c.contract) + `,"0x0",` + q(hex(c.callBlock)) + `]`},
		{name: "call reverts", method: "eth_call", params: `[{"to":` + q(c.contract) + `},"latest"]`},
		{name: "call bad params", method: "eth_call", params: `[{"to":"0xzz"},"latest"]`},
		{name: "call missing params", method: "eth_call", params: `[]`},
		{name: "estimateGas", method: "eth_estimateGas",
			params: `[{"from":` + q(c.account) + `,"to":` + q(c.contract) + `,"data":"` + callData + `"}]`},
		{name: "tx by hash", method: "eth_getTransactionByHash", params: `[` + q(c.callTx) + `]`},
		{name: "receipt", method: "eth_getTransactionReceipt", params: `[` + q(c.deployTx) + `]`},
		{name: "block receipts", method: "eth_getBlockReceipts", params: `[` + q(hex(c.callBlock)) + `]`},
		{name: "logs by address", method: "eth_getLogs",
			params: `[{"fromBlock":"0x0","toBlock":` + q(hex(c.head)) + `,"address":` + q(c.contract) + `}]`},
		{name: "logs by topics", method: "eth_getLogs",
			params: `[{"fromBlock":"0x0","toBlock":` + q(hex(c.head)) + `,"topics":[[` + topic1 + `,` + topic2 + `],` + pad(c.account) + `]}]`},
		{name: "logs by blockHash", method: "eth_getLogs", params: `[{"blockHash":` + q(c.deployBlockHash) + `}]`},
		{name: "feeHistory", method: "eth_feeHistory", params: `["0x2",` + q(hex(c.callBlock)) + `,[25,75]]`},
		{name: "unknown method", method: "venn_noSuchMethod", params: `[]`},
		{name: "sendRaw already known", method: "eth_sendRawTransaction", params: `[` + q(c.queuedRaw) + `]`, mode: alreadyKnown},
	}
}

// requestID gives each case its own id, numbers and strings mixed, so a
// client matching answers by id would notice one echoed wrong.
func requestID(i int) string {
	if i%2 == 0 {
		return strconv.Itoa(i + 1)
	}
	return strconv.Quote("case-" + strconv.Itoa(i))
}

func (cc compatCase) body(i int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, requestID(i), cc.method, cc.params)
}

// TestSameAnswersAsGeth sends the same calls to venn and straight to geth
// and expects the client to see no difference, over HTTP, over one
// WebSocket with calls in flight together, and as one batch.
func TestSameAnswersAsGeth(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	chain := fixture(t, g)
	v := startVenn(t, []*gethtest.Geth{g}, vennOptions{})
	waitVennHead(t, v, chain.head)
	cases := compatCases(chain)

	t.Run("http", func(t *testing.T) {
		for i, cc := range cases {
			t.Run(cc.name, func(t *testing.T) {
				status, got, err := post(v.URL(chainName), cc.body(i))
				if err != nil {
					t.Fatalf("venn: %v", err)
				}
				wantStatus, want, err := post(g.HTTPURL(), cc.body(i))
				if err != nil {
					t.Fatalf("geth: %v", err)
				}
				if status != wantStatus {
					t.Errorf("HTTP status %d, geth's %d", status, wantStatus)
				}
				compareAnswer(t, chain, cc, i, want, got)
			})
		}
	})

	t.Run("ws", func(t *testing.T) {
		got := wsExchange(t, v.WSURL(chainName), cases)
		for i, cc := range cases {
			t.Run(cc.name, func(t *testing.T) {
				answer, ok := got[idKey(t, json.RawMessage(requestID(i)))]
				if !ok {
					t.Fatalf("no answer with id %s", requestID(i))
				}
				_, want, err := post(g.HTTPURL(), cc.body(i))
				if err != nil {
					t.Fatalf("geth: %v", err)
				}
				compareAnswer(t, chain, cc, i, want, answer)
			})
		}
	})

	t.Run("batch", func(t *testing.T) {
		bodies := make([][]byte, len(cases))
		for i, cc := range cases {
			bodies[i] = cc.body(i)
		}
		batch := append(append([]byte("["), bytes.Join(bodies, []byte(","))...), ']')
		status, out, err := post(v.URL(chainName), batch)
		if err != nil {
			t.Fatalf("venn: %v", err)
		}
		if status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", status, out)
		}
		var answers []json.RawMessage
		if err := json.Unmarshal(out, &answers); err != nil {
			t.Fatalf("batch answer is not an array: %v: %.300s", err, out)
		}
		if len(answers) != len(cases) {
			t.Fatalf("batch of %d calls got %d answers", len(cases), len(answers))
		}
		for i, cc := range cases {
			t.Run(cc.name, func(t *testing.T) {
				var r reply
				if err := json.Unmarshal(answers[i], &r); err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
				if gotID, wantID := idKey(t, r.ID), idKey(t, json.RawMessage(requestID(i))); gotID != wantID {
					t.Fatalf("answer %d has id %s, want %s (answers in request order)", i, gotID, wantID)
				}
				_, want, err := post(g.HTTPURL(), cc.body(i))
				if err != nil {
					t.Fatalf("geth: %v", err)
				}
				compareAnswer(t, chain, cc, i, want, answers[i])
			})
		}
	})
}

// compareAnswer checks venn's answer (got) to case i against geth's (want).
func compareAnswer(t *testing.T, chain devChain, cc compatCase, i int, want, got []byte) {
	t.Helper()
	switch cc.mode {
	case alreadyKnown:
		want = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%q}`, requestID(i), chain.queuedHash)
	case blockNumber:
		g, w := result(t, "venn", got), result(t, "geth", want)
		gn, wn := quantity(t, g), quantity(t, w)
		if gn > wn || (wn == chain.head && gn != wn) {
			t.Errorf("venn eth_blockNumber %d, geth (asked after) %d, chain still at %d", gn, wn, chain.head)
		}
		return
	case latestBlock:
		var gb, wb struct {
			Number json.RawMessage `json:"number"`
		}
		mustUnmarshal(t, result(t, "venn", got), &gb)
		mustUnmarshal(t, result(t, "geth", want), &wb)
		gn, wn := quantity(t, gb.Number), quantity(t, wb.Number)
		if gn < chain.head || gn > wn {
			t.Errorf("venn latest block %d, want between the fixture head %d and geth's latest %d", gn, chain.head, wn)
		}
		if gn != wn {
			return
		}
	}
	g, err := normalize(got)
	if err != nil {
		t.Fatalf("venn: %v", err)
	}
	w, err := normalize(want)
	if err != nil {
		t.Fatalf("geth: %v", err)
	}
	if g != w {
		t.Errorf("%s %s\nvenn: %s\ngeth: %s", cc.method, cc.params, truncate(g), truncate(w))
	}
}

// result returns the result of an answer, failing on an error answer.
func result(t *testing.T, who string, raw []byte) json.RawMessage {
	t.Helper()
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v: %.200s", who, err, raw)
	}
	if r.Error != nil || r.Result == nil {
		t.Fatalf("%s: want a result, got %.300s", who, raw)
	}
	return r.Result
}

// wsExchange writes every case's call on one WebSocket connection, all at
// once from separate goroutines, and returns the answers by id.
func wsExchange(t *testing.T, url string, cases []compatCase) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	conn.SetReadLimit(maxReplyBytes)

	var wg sync.WaitGroup
	// On any early return, stop the writers and wait for them.
	defer func() {
		cancel()
		_ = conn.CloseNow()
		wg.Wait()
	}()
	writeErrs := make(chan error, len(cases))
	for i, cc := range cases {
		wg.Go(func() {
			if err := conn.Write(ctx, websocket.MessageText, cc.body(i)); err != nil {
				writeErrs <- fmt.Errorf("write %s: %w", cc.name, err)
			}
		})
	}

	got := make(map[string][]byte, len(cases))
	for len(got) < len(cases) {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read after %d of %d answers: %v", len(got), len(cases), err)
		}
		if typ != websocket.MessageText {
			t.Errorf("answer sent as %v, want text", typ)
		}
		var r reply
		if err := json.Unmarshal(msg, &r); err != nil {
			t.Fatalf("undecodable answer: %v: %.200s", err, msg)
		}
		key := idKey(t, r.ID)
		if _, dup := got[key]; dup {
			t.Fatalf("two answers with id %s", key)
		}
		got[key] = msg
	}
	wg.Wait()
	close(writeErrs)
	for err := range writeErrs {
		t.Error(err)
	}
	if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Logf("close: %v", err)
	}
	return got
}

// waitVennHead waits until venn's eth_blockNumber reaches head: venn follows
// heads on its own schedule, and the comparisons assume it has caught up.
func waitVennHead(t *testing.T, v *venn, head uint64) {
	t.Helper()
	waitHeadAt(t, v.URL(chainName), head)
}

// waitHeadAt is waitVennHead at url (a chain's URL with a key in the path).
func waitHeadAt(t *testing.T, url string, head uint64) {
	t.Helper()
	var last string
	ok := testkit.Poll(readyTimeout, func() bool {
		res, err := tryCall(url, "eth_blockNumber")
		if err != nil {
			last = err.Error()
			return false
		}
		last = string(res)
		var s string
		if json.Unmarshal(res, &s) != nil {
			return false
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		return err == nil && n >= head
	})
	if !ok {
		t.Fatalf("venn's eth_blockNumber did not reach %d within %v: last %s", head, readyTimeout, last)
	}
}

// idKey is an id's normalised JSON, for matching answers to calls.
func idKey(t *testing.T, id json.RawMessage) string {
	t.Helper()
	if id == nil {
		return "<absent>"
	}
	k, err := normalize(id)
	if err != nil {
		t.Fatalf("id: %v", err)
	}
	return k
}

// truncate keeps failure messages readable; full blocks run to kilobytes.
func truncate(s string) string {
	const maxShown = 2000
	if len(s) <= maxShown {
		return s
	}
	return s[:maxShown] + "...(truncated)"
}
