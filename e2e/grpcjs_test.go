package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// The grpc-js test runs e2e/grpcjs/emerald.mjs, @grpc/grpc-js with
// @grpc/proto-loader loading emerald/proto unchanged, against venn's
// emerald gRPC API in front of geth --dev.
const (
	grpcjsDir    = "grpcjs"
	grpcjsScript = "emerald.mjs"
	grpcjsKey    = "grpcjs-key-0123456789abcdef"
	// grpcjsCalls is how many emitter calls the test sends while the
	// streams are open, each mined in a block of its own with
	// gethtest.EmitterLogs logs.
	grpcjsCalls = 3
	// grpcjsChain is the ChainRef the test's chain is served as (grpc_id).
	grpcjsChain = "CHAIN_ETHEREUM__MAINNET"
	// Bounds: the script's own deadline, and the test's for the whole
	// node process (its start on a loaded machine included).
	grpcjsScriptTimeout = 30 * time.Second
	grpcjsRunTimeout    = 45 * time.Second
)

// emitterLogs is how many logs one call of gethtest's emitter makes
// (LOG0 to LOG4).
const emitterLogs = 5

// grpcjsResult is what emerald.mjs prints last.
type grpcjsResult struct {
	Calls []struct {
		ID            uint32 `json:"id"`
		Succeed       bool   `json:"succeed"`
		Payload       []byte `json:"payload"` // base64 in the JSON
		ItemErrorCode int    `json:"item_error_code"`
		ErrorMessage  string `json:"error_message"`
	} `json:"calls"`
	CallError *string `json:"callError"`
	Heads     []struct {
		Chain         string `json:"chain"`
		Height        string `json:"height"`
		BlockID       string `json:"block_id"`
		ParentBlockID string `json:"parent_block_id"`
		Timestamp     string `json:"timestamp"`
		Reorg         string `json:"reorg"`
	} `json:"heads"`
	NewHeads [][]byte `json:"newHeads"`
	Logs     [][]byte `json:"logs"`
	Errors   []string `json:"errors"`
	TimedOut bool     `json:"timedOut"`
}

// grpcjsCall is one NativeCall item the script sends: params as the JSON
// array's text.
type grpcjsCall struct {
	Method string `json:"method"`
	Params string `json:"params"`
}

// TestGRPCJSAgainstGeth: a grpc-js client, knowing venn only through the
// repository's .proto files, gets from NativeCall geth's JSON results byte
// for byte, from NativeSubscribe the WebSocket's newHeads and logs
// notifications byte for byte (venn's and geth's own), and from
// SubscribeHead every block geth mines with geth's hashes and times.
func TestGRPCJSAgainstGeth(t *testing.T) {
	dir := nodeProject(t, grpcjsDir, "@grpc/grpc-js", grpcjsScript)
	protoDir, err := filepath.Abs(filepath.Join("..", "emerald", "proto"))
	if err != nil {
		t.Fatal(err)
	}
	g := gethtest.Start(t, gethtest.Options{})
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	if len(accounts) == 0 {
		t.Fatal("geth --dev has no dev account")
	}
	dev := accounts[0]
	send := func(tx map[string]any) (string, receipt) {
		var h string
		mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction", tx), &h)
		return h, waitReceipt(t, g, h)
	}
	_, deployed := send(map[string]any{"from": dev, "data": gethtest.EmitterCode()})
	contract := deployed.ContractAddress
	tx, rc := send(map[string]any{"from": dev, "to": contract, "data": gethtest.Topic(1)})
	b := string(bytes.Trim(rc.BlockNumber, `"`))

	v := startVenn(t, []*gethtest.Geth{g}, vennOptions{grpc: true,
		top:     "auth:\n  keys:\n    - {name: grpcjs, key: " + grpcjsKey + "}",
		inChain: "    grpc_id: 100"})
	keyed := "/" + grpcjsKey // the key as the path's second segment

	// Blocks and the transaction are fixed: geth answers them the same
	// now and after the script asked venn.
	filter := `{"address":"` + contract + `"}`
	calls := []grpcjsCall{
		{"eth_chainId", `[]`},
		{"eth_getBlockByNumber", `["` + b + `",true]`},
		{"eth_getBlockByHash", `["` + rc.BlockHash + `",false]`},
		{"eth_getTransactionByHash", `["` + tx + `"]`},
		{"eth_getTransactionReceipt", `["` + tx + `"]`},
		{"eth_getLogs", `[{"fromBlock":"` + b + `","toBlock":"` + b + `","address":"` + contract + `"}]`},
		{"eth_getBalance", `["` + dev + `","` + b + `"]`},
		{"eth_getCode", `["` + contract + `","` + b + `"]`},
		{"eth_call", `[{"to":"` + contract + `","data":"` + gethtest.Topic(2) + `"},"` + b + `"]`},
		{"eth_getBlockByNumber", `["0xffffff",false]`},
		{"eth_getTransactionByBlockNumberAndIndex", `["` + b + `","0x0"]`},
		{"eth_getBlockByNumber", `["not-a-block",false]`},
	}
	callsJSON, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}

	// The WebSocket side, venn's and geth's, subscribed before the script.
	vws, gws := subDial(t, v.WSURL(chainName)+keyed), subDial(t, g.WSURL())
	vHeads, gHeads := subRaw(t, vws, "venn newHeads", "newHeads"), subRaw(t, gws, "geth newHeads", "newHeads")
	vLogs := subRaw(t, vws, "venn logs", "logs", json.RawMessage(filter))
	gLogs := subRaw(t, gws, "geth logs", "logs", json.RawMessage(filter))

	ctx, cancel := context.WithTimeout(context.Background(), grpcjsRunTimeout)
	defer cancel()
	stderr := &testkit.Buffer{}
	cmd := exec.CommandContext(ctx, "node", grpcjsScript)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"VENN_GRPC_ADDR="+v.grpcAddr,
		"PROTO_DIR="+protoDir,
		"API_KEY="+grpcjsKey,
		"CHAIN="+grpcjsChain,
		"CALLS="+string(callsJSON),
		"LOGS_FILTER="+filter,
		"TIMEOUT_MS="+strconv.FormatInt(grpcjsScriptTimeout.Milliseconds(), 10))
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node %s: %v", grpcjsScript, err)
	}
	// The script prints two lines: ready, then its result. Wait follows
	// the last read of stdout.
	lines := make(chan []byte, 2)
	done := make(chan struct{})
	var runErr error
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, maxReplyBytes)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			default: // more than the two lines: the checks fail on what they got
			}
		}
		close(lines)
		runErr = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cancel() // kills node if it still runs
		<-done
	})
	next := func(what string) []byte {
		t.Helper()
		select {
		case l, ok := <-lines:
			if ok {
				return l
			}
			<-done
			t.Fatalf("node %s exited before its %s: %v; stderr:\n%s", grpcjsScript, what, runErr, stderr.String())
		case <-ctx.Done():
			t.Fatalf("node %s: no %s within %v; stderr:\n%s", grpcjsScript, what, grpcjsRunTimeout, stderr.String())
		}
		return nil
	}

	// The call has answered and SubscribeHead has sent its first head;
	// the NativeSubscribe streams must be in venn's subcenter (beside the
	// test's WebSocket ones) before the first block they are to see.
	if l := next("ready line"); string(l) != `{"ready":true}` {
		t.Fatalf("node %s: %s; stderr:\n%s", grpcjsScript, truncate(string(l)), stderr.String())
	}
	testkit.WaitFor(t, subSettle, "grpc-js's NativeSubscribe streams in venn", func() bool {
		heads, _ := v.metric(t, "venn_subscriptions", `kind="newHeads"`)
		logs, _ := v.metric(t, "venn_subscriptions", `kind="logs"`)
		return heads >= 2 && logs >= 2
	})
	// Every block after start is the streams' to see: they are open, and
	// venn has delivered up to start.
	start := quantity(t, g.MustCall(t, "eth_blockNumber"))
	waitHeadAt(t, v.URL(chainName)+keyed, start)

	var end uint64
	for i := range grpcjsCalls {
		_, rc := send(map[string]any{"from": dev, "to": contract, "data": gethtest.Topic(uint64(100 + i))})
		end = quantity(t, rc.BlockNumber)
	}
	wantLogs := grpcjsCalls * emitterLogs
	if _, err := fmt.Fprintf(stdin, "{\"until\": %d, \"logs\": %d}\n", end, wantLogs); err != nil {
		t.Fatalf("tell node %s how far to watch: %v; stderr:\n%s", grpcjsScript, err, stderr.String())
	}
	_ = stdin.Close()
	out := next("result")
	<-done
	var res grpcjsResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("node %s: %v; output %q; stderr:\n%s", grpcjsScript, err, truncate(string(out)), stderr.String())
	}
	if res.TimedOut || runErr != nil || len(res.Errors) > 0 || res.CallError != nil {
		t.Fatalf("node %s: exit %v, timed out %v, errors %q, NativeCall %v; stderr:\n%s",
			grpcjsScript, runErr, res.TimedOut, res.Errors, res.CallError, stderr.String())
	}
	t.Logf("grpc-js got %d NativeCall items, %d SubscribeHead heads, %d newHeads and %d logs (geth mined %d..%d)",
		len(res.Calls), len(res.Heads), len(res.NewHeads), len(res.Logs), start+1, end)

	grpcjsCheckCalls(t, g, calls, res)
	grpcjsCheckHeads(t, g, res, start, end)

	// NativeSubscribe: each payload is the WebSocket notification's
	// result, venn's and geth's, byte for byte.
	ws := func(n *subNotes[json.RawMessage], count int) []json.RawMessage {
		t.Helper()
		testkit.WaitFor(t, subSettle, "the WebSocket notifications up to block "+strconv.FormatUint(end, 10), func() bool {
			list, err := n.list()
			return err != nil || len(subInRange(t, list, start+1, end)) >= count
		})
		list, err := n.list()
		if err != nil {
			t.Fatalf("WebSocket subscription: %v", err)
		}
		return subInRange(t, list, start+1, end)
	}
	if len(res.NewHeads) == 0 {
		t.Fatal("NativeSubscribe newHeads: no head")
	}
	heads := subInRange(t, raws(res.NewHeads), start+1, end)
	if first := subParse(t, res.NewHeads[0]).block(); first > start+1 {
		t.Errorf("NativeSubscribe newHeads began at block %d, want %d or before", first, start+1)
	}
	subCheckHeads(t, "NativeSubscribe newHeads", heads)
	count := int(end - start)
	if err := subSame(ws(vHeads, count), heads); err != nil {
		t.Errorf("NativeSubscribe newHeads against venn's WebSocket: %v", err)
	}
	if err := subSame(ws(gHeads, count), heads); err != nil {
		t.Errorf("NativeSubscribe newHeads against geth's WebSocket: %v", err)
	}
	logs := raws(res.Logs)
	if len(logs) != wantLogs {
		t.Errorf("NativeSubscribe logs: %d, want %d", len(logs), wantLogs)
	}
	if err := subSame(ws(vLogs, wantLogs), logs); err != nil {
		t.Errorf("NativeSubscribe logs against venn's WebSocket: %v", err)
	}
	if err := subSame(ws(gLogs, wantLogs), logs); err != nil {
		t.Errorf("NativeSubscribe logs against geth's WebSocket: %v", err)
	}
}

// grpcjsCheckCalls: each NativeCall item is geth's answer to the same
// call over HTTP, the result's bytes as payload, or its error's code.
func grpcjsCheckCalls(t *testing.T, g *gethtest.Geth, calls []grpcjsCall, res grpcjsResult) {
	t.Helper()
	if len(res.Calls) != len(calls) {
		t.Fatalf("NativeCall: %d items, want %d", len(res.Calls), len(calls))
	}
	for i, c := range calls {
		got := res.Calls[i]
		want, err := g.CallJSON(context.Background(), c.Method, c.Params)
		var gerr *gethtest.RPCError
		switch {
		case got.ID != uint32(i+1):
			t.Errorf("%s %s: item %d in place %d (sorted)", c.Method, c.Params, got.ID, i+1)
		case errors.As(err, &gerr):
			if got.Succeed || got.ItemErrorCode != gerr.Code || got.ErrorMessage == "" {
				t.Errorf("%s %s: succeed %v, error %d %q; geth: %d %q", c.Method, c.Params, got.Succeed,
					got.ItemErrorCode, got.ErrorMessage, gerr.Code, gerr.Message)
			}
		case err != nil:
			t.Fatalf("geth %s: %v", c.Method, err)
		case !got.Succeed || !bytes.Equal(got.Payload, want):
			t.Errorf("%s %s: succeed %v %q, payload\n%s\ngeth:\n%s", c.Method, c.Params, got.Succeed, got.ErrorMessage,
				truncate(string(got.Payload)), truncate(string(want)))
		}
	}
}

// grpcjsCheckHeads: SubscribeHead sent geth's blocks from at most start+1
// (the head it started at may come first) through end, each once and in
// order: height, block_id and parent_block_id (hex without 0x) and the
// timestamp in milliseconds.
func grpcjsCheckHeads(t *testing.T, g *gethtest.Geth, res grpcjsResult, start, end uint64) {
	t.Helper()
	if len(res.Heads) == 0 {
		t.Fatal("SubscribeHead: no head")
	}
	first, _ := strconv.ParseUint(res.Heads[0].Height, 10, 64)
	if first > start+1 {
		t.Fatalf("SubscribeHead began at block %d, want %d or before", first, start+1)
	}
	if want := end - first + 1; uint64(len(res.Heads)) < want {
		t.Errorf("SubscribeHead: %d heads, want %d or more (%d..%d)", len(res.Heads), want, first, end)
	}
	for i, h := range res.Heads {
		n := first + uint64(i)
		var blk struct {
			Hash       string `json:"hash"`
			ParentHash string `json:"parentHash"`
			Timestamp  string `json:"timestamp"`
		}
		mustUnmarshal(t, g.MustCall(t, "eth_getBlockByNumber", hex(n), false), &blk)
		ts, _ := strconv.ParseUint(strings.TrimPrefix(blk.Timestamp, "0x"), 16, 64)
		want := fmt.Sprintf("%s %d %s %s %d 0", grpcjsChain, n, strings.TrimPrefix(blk.Hash, "0x"),
			strings.TrimPrefix(blk.ParentHash, "0x"), ts*1000)
		if got := strings.Join([]string{h.Chain, h.Height, h.BlockID, h.ParentBlockID, h.Timestamp, h.Reorg}, " "); got != want {
			t.Errorf("SubscribeHead #%d:\n got %s\nwant %s (chain height block_id parent_block_id timestamp reorg)", i, got, want)
		}
	}
}

// raws is payloads as JSON messages.
func raws(payloads [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(payloads))
	for i, p := range payloads {
		out[i] = p
	}
	return out
}
