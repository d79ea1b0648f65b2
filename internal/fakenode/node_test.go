package fakenode

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestMixRoundTrip(t *testing.T) {
	for _, x := range []uint64{0, 1, 2, 100, 1 << 32, 1<<63 - 1, 1<<64 - 1, 0xdeadbeefcafe} {
		if got := unmix64(mix64(x)); got != x {
			t.Errorf("unmix64(mix64(%#x)) = %#x", x, got)
		}
	}
}

// TestWire replays request/answer pairs byte for byte: the texts are geth
// v1.17's.
func TestWire(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	tests := []struct {
		name string
		give string
		want string
	}{
		{"chain id", `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x539"}`},
		{"id kept as sent", `{"jsonrpc":"2.0","id":"a-b","method":"eth_chainId"}`,
			`{"jsonrpc":"2.0","id":"a-b","result":"0x539"}`},
		{"net_version", `{"jsonrpc":"2.0","id":1,"method":"net_version"}`,
			`{"jsonrpc":"2.0","id":1,"result":"1337"}`},
		{"client version", `{"jsonrpc":"2.0","id":1,"method":"web3_clientVersion"}`,
			`{"jsonrpc":"2.0","id":1,"result":"fakenode/v1"}`},
		{"block number", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x64"}`},
		{"syncing", `{"jsonrpc":"2.0","id":1,"method":"eth_syncing","params":[]}`,
			`{"jsonrpc":"2.0","id":1,"result":false}`},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"foo_bar","params":[]}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"the method foo_bar does not exist/is not available"}}`},
		{"parse error", `{"jsonrpc":"2.0",`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		{"empty batch", `[]`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"empty batch"}}`},
		{"no version", `{"id":3,"method":"eth_chainId"}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"invalid request"}}`},
		{"not an object", `1`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`},
		{"notification", `{"jsonrpc":"2.0","method":"eth_chainId"}`, ``},
		{"batch in order", `[{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"},{"jsonrpc":"2.0","method":"eth_chainId"},{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},5]`,
			`[{"jsonrpc":"2.0","id":2,"result":"0x64"},{"jsonrpc":"2.0","id":1,"result":"0x539"},{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}]`},
		{"too many args", `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[1]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"too many arguments, want at most 0"}}`},
		{"non-array args", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":{"a":1}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"non-array args"}}`},
		{"missing arg", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"missing value for required argument 1"}}`},
		{"bad address", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x12","latest"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument 0: hex string has length 2, want 40 for common.Address"}}`},
		{"bad block number", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["12",false]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument 0: hex string without 0x prefix"}}`},
		{"balance above head", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f","0x65"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}`},
		{"balance unknown hash", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f","0x00000000000000000000000000000000000000000000000000000000deadbeef"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header for hash not found"}}`},
		{"block above head", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x65",false]}`,
			`{"jsonrpc":"2.0","id":1,"result":null}`},
		{"receipts above head", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockReceipts","params":["0x65"]}`,
			`{"jsonrpc":"2.0","id":1,"result":null}`},
		{"genesis receipts", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockReceipts","params":["earliest"]}`,
			`{"jsonrpc":"2.0","id":1,"result":[]}`},
		{"unknown tx", `{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionByHash","params":["0x00000000000000000000000000000000000000000000000000000000deadbeef"]}`,
			`{"jsonrpc":"2.0","id":1,"result":null}`},
		{"revert", `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48","input":"0xdeadbeef01"},"latest"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted: nope","data":"0x08c379a0000000000000000000000000000000000000000000000000000000000000002000000000000000000000000000000000000000000000000000000000000000046e6f706500000000000000000000000000000000000000000000000000000000"}}`},
		{"call of an account", `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f","data":"0x01"}]}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x"}`},
		{"transfer gas", `{"jsonrpc":"2.0","id":1,"method":"eth_estimateGas","params":[{"to":"0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f"}]}`,
			`{"jsonrpc":"2.0","id":1,"result":"0x5208"}`},
		{"subscribe over http", `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"notifications not supported"}}`},
		{"reversed log range", `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x32","toBlock":"0x2f"}]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid block range params"}}`},
		{"logs beyond head", `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x60","toBlock":"0x70"}]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"block range extends beyond current head block"}}`},
		{"logs from beyond head to latest", `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x70"}]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid block range params"}}`},
		{"logs hash and range", `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"blockHash":"0x00000000000000000000000000000000000000000000000000000000deadbeef","fromBlock":"0x3"}]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid argument 0: cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other"}}`},
		{"logs unknown hash", `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"blockHash":"0x00000000000000000000000000000000000000000000000000000000deadbeef"}]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"unknown block"}}`},
		{"pending logs", `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"pending"}]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"pending logs are not supported"}}`},
		{"empty raw tx", `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["0x"]}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"typed transaction too short"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, got := post(t, hc, n.URL(), tt.give)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			if got != tt.want {
				t.Errorf("\ngive %s\ngot  %s\nwant %s", tt.give, got, tt.want)
			}
		})
	}
}

func TestHTTPGate(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	tests := []struct {
		name       string
		method     string
		ctype      string
		wantStatus int
		wantBody   string
	}{
		{"health check", http.MethodGet, "", http.StatusOK, ""},
		{"put", http.MethodPut, "application/json", http.StatusMethodNotAllowed, "method not allowed\n"},
		{"text body", http.MethodPost, "text/plain", http.StatusUnsupportedMediaType, "invalid content type, only application/json is supported\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body *strings.Reader
			if tt.method == http.MethodGet {
				body = strings.NewReader("")
			} else {
				body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`)
			}
			req, err := http.NewRequest(tt.method, n.URL(), body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus || string(got) != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, got, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

func TestBatchTooLarge(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	var sb strings.Builder
	sb.WriteString(`[{"jsonrpc":"2.0","method":"eth_chainId"}`)
	for i := 0; i < MaxBatch; i++ {
		sb.WriteString(`,{"jsonrpc":"2.0","id":9,"method":"eth_chainId"}`)
	}
	sb.WriteString(`]`)
	_, got := post(t, hc, n.URL(), sb.String())
	want := `[{"jsonrpc":"2.0","id":9,"error":{"code":-32600,"message":"batch too large"}}]`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestSendRawTransaction(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	raw := "0x02f8730182012c8405f5e10085174876e80082520894a0b86991c6218b36c1d19d4a2e9eb0ce3606eb488080c0"
	got := mustRPC(t, hc, n.URL(), "eth_sendRawTransaction", raw)
	// keccak256 of the bytes above.
	if want := `"0x`; !strings.HasPrefix(string(got), want) || len(got) != 68 {
		t.Fatalf("hash = %s", got)
	}
	_, rerr := callRPC(t, hc, n.URL(), "eth_sendRawTransaction", raw)
	if rerr == nil || rerr.Code != -32000 || rerr.Message != "already known" {
		t.Errorf("second send: %v, want -32000 already known", rerr)
	}
}

// TestChainIsConsistent checks what every gateway relies on: hashes link,
// lookups by hash agree with lookups by number, tags sit where they should.
func TestChainIsConsistent(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	type block struct {
		Number       json.RawMessage   `json:"number"`
		Hash         string            `json:"hash"`
		ParentHash   string            `json:"parentHash"`
		Timestamp    json.RawMessage   `json:"timestamp"`
		Transactions []json.RawMessage `json:"transactions"`
	}
	get := func(method string, arg any) block {
		var b block
		if err := json.Unmarshal(mustRPC(t, hc, n.URL(), method, arg, false), &b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	head := get("eth_getBlockByNumber", "latest")
	if hexNum(t, head.Number) != 100 || head.Hash != n.BlockHash(100) {
		t.Fatalf("latest = %s %s, want 100 %s", head.Number, head.Hash, n.BlockHash(100))
	}
	if got := hexNum(t, head.Timestamp); got != DefaultGenesisTime+12*100 {
		t.Errorf("timestamp = %d", got)
	}
	parent := get("eth_getBlockByHash", head.ParentHash)
	if hexNum(t, parent.Number) != 99 || parent.Hash != head.ParentHash {
		t.Errorf("parent = %s %s", parent.Number, parent.Hash)
	}
	for tag, want := range map[string]uint64{"safe": 100 - DefaultSafeDepth, "finalized": 100 - DefaultFinalizedDepth, "earliest": 0, "pending": 100} {
		if got := hexNum(t, get("eth_getBlockByNumber", tag).Number); got != want {
			t.Errorf("%s = %d, want %d", tag, got, want)
		}
	}

	var txHash string
	if err := json.Unmarshal(head.Transactions[1], &txHash); err != nil || txHash != n.TxHash(100, 1) {
		t.Fatalf("tx 1 of head = %s, want %s", head.Transactions[1], n.TxHash(100, 1))
	}
	var rcpt struct {
		BlockHash string `json:"blockHash"`
		Logs      []struct {
			LogIndex json.RawMessage `json:"logIndex"`
		} `json:"logs"`
	}
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_getTransactionReceipt", txHash), &rcpt); err != nil {
		t.Fatal(err)
	}
	if rcpt.BlockHash != head.Hash || len(rcpt.Logs) != 1 || hexNum(t, rcpt.Logs[0].LogIndex) != 1 {
		t.Errorf("receipt = %+v", rcpt)
	}

	// Balances differ by block and are served by hash too.
	addr := Senders()[0]
	atHead := mustRPC(t, hc, n.URL(), "eth_getBalance", addr, "latest")
	byHash := mustRPC(t, hc, n.URL(), "eth_getBalance", addr, head.Hash)
	byObj := mustRPC(t, hc, n.URL(), "eth_getBalance", addr, map[string]string{"blockHash": head.Hash})
	before := mustRPC(t, hc, n.URL(), "eth_getBalance", addr, "0x63")
	if string(atHead) != string(byHash) || string(atHead) != string(byObj) || string(atHead) == string(before) {
		t.Errorf("balances: latest %s, by hash %s, by object %s, at 99 %s", atHead, byHash, byObj, before)
	}

	// Nonces count the sender's transactions.
	var last uint64
	for num := uint64(1); num <= 100; num++ {
		for idx := 0; idx < txsPerBlock; idx++ {
			g := num*txsPerBlock + uint64(idx)
			if senderOf(g) == 0 {
				last = nonceOf(g)
			}
		}
	}
	if got := hexNum(t, mustRPC(t, hc, n.URL(), "eth_getTransactionCount", addr, "latest")); got != last+1 {
		t.Errorf("nonce = %d, want %d", got, last+1)
	}
}

func TestFork(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	old98, old99 := n.BlockHash(98), n.BlockHash(99)
	n.SetFork(99, 7)
	if n.BlockHash(98) != old98 || n.BlockHash(99) == old99 {
		t.Fatalf("fork from 99 changed 98 or kept 99")
	}
	if got := mustRPC(t, hc, n.URL(), "eth_getBlockByHash", old99, false); string(got) != "null" {
		t.Errorf("orphan by hash = %.80s, want null", got)
	}
	var b struct {
		ParentHash string `json:"parentHash"`
	}
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_getBlockByHash", n.BlockHash(100), false), &b); err != nil {
		t.Fatal(err)
	}
	if b.ParentHash != n.BlockHash(99) {
		t.Errorf("parent of 100 = %s, want %s", b.ParentHash, n.BlockHash(99))
	}
	n.SetFork(99, 0)
	if n.BlockHash(99) != old99 {
		t.Errorf("salt 0 did not restore the original chain")
	}
}
