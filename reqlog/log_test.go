package reqlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/jrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is an output the test reads while the writer writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// logged runs calls through a log of cfg and returns its lines, decoded.
func logged(t *testing.T, cfg Config, calls ...jrpc.Call) []map[string]any {
	t.Helper()
	var out syncBuffer
	l := New(cfg.WithDefaults(), &out, nil, prometheus.NewRegistry(), keccakTx)
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		l.Record(c)
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return decodeLines(t, out.String())
}

func decodeLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

// rawTx is a type-2 transaction's eth_sendRawTransaction params; its hash
// is the keccak of its bytes.
const rawTx = `["0x02f86b0180843b9aca00850df8475800825208940000000000000000000000000000000000000001880de0b6b3a764000080c0"]`

var rawTxHash = crypto.Keccak256Hash(common.FromHex(rawTx[2 : len(rawTx)-2])).Hex()

// keccakTx is the log's TxHash for a typed transaction's params, the only
// kind these tests send (app gives it integrity.SentTxHash).
func keccakTx(params json.RawMessage) (string, bool) {
	var args []string
	if json.Unmarshal(params, &args) != nil || len(args) == 0 {
		return "", false
	}
	return crypto.Keccak256Hash(common.FromHex(args[0])).Hex(), true
}

func call(method, params string, p *jrpc.Peer) jrpc.Call {
	return jrpc.Call{Start: time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC), Chain: "eth", Peer: p, Method: method,
		Params: json.RawMessage(params), Batch: -1, Note: jrpc.Note{Source: "remotes", Remote: "alchemy", Attempts: 2},
		Duration: 1500 * time.Microsecond, Code: 0, Outcome: "ok", Status: 200, BytesIn: 90, BytesOut: 60}
}

// TestLines checks each field of a line, the client as a key name or a
// masked address, and params: absent by default, cut to size when on, a
// raw transaction as its hash only.
func TestLines(t *testing.T) {
	v4 := &jrpc.Peer{Transport: "http", RequestID: "r-1", ClientIP: netip.MustParseAddr("203.0.113.77"), RemoteAddr: "10.0.0.1:5555"}
	v6 := &jrpc.Peer{Transport: "ws", RequestID: "r-2", RemoteAddr: "[2001:db8:1:2:3:4:5:6]:443"}
	keyed := &jrpc.Peer{Transport: "http", RequestID: "r-3", Key: "indexer", ClientIP: netip.MustParseAddr("198.51.100.9")}
	balance := `["0x00000000000000000000000000000000000000aa","latest"]`

	lines := logged(t, Config{}, call("eth_getBalance", balance, v4), call("eth_call", balance, v6), call("eth_sendRawTransaction", rawTx, keyed))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	want := map[string]any{"time": "2026-12-01T03:12:00Z", "request_id": "r-1", "chain": "eth", "method": "eth_getBalance",
		"transport": "http", "client": "ip:203.0.113.0/24", "source": "remotes", "remote": "alchemy", "attempts": 2.0,
		"duration_ms": 1.5, "outcome": "ok", "code": 0.0, "status": 200.0, "bytes_in": 90.0, "bytes_out": 60.0}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("%s = %v, want %v", k, lines[0][k], v)
		}
	}
	if len(lines[0]) != len(want) {
		t.Errorf("line has %d fields, want %d: %v", len(lines[0]), len(want), lines[0])
	}
	if got := lines[1]["client"]; got != "ip:2001:db8:1:2::/64" {
		t.Errorf("IPv6 client %v, want its /64", got)
	}
	if got := lines[2]["client"]; got != "key:indexer" {
		t.Errorf("keyed client %v, want its key's name", got)
	}
	for _, l := range lines {
		if _, ok := l["params"]; ok || l["tx_hash"] != nil {
			t.Errorf("params logged by default: %v", l)
		}
	}

	long := `["` + strings.Repeat("ab", 200) + `"]`
	lines = logged(t, Config{Params: true, ParamsMaxBytes: 64},
		call("eth_getBalance", balance, v4), call("eth_sendRawTransaction", rawTx, v4), call("eth_call", long, v4))
	if got, _ := json.Marshal(lines[0]["params"]); string(got) != strings.ReplaceAll(balance, " ", "") {
		t.Errorf("params %s, want %s", got, balance)
	}
	if lines[1]["tx_hash"] != rawTxHash || lines[1]["params"] != nil || strings.Contains(lines[1]["tx_hash"].(string), "f86b") {
		t.Errorf("raw transaction logged as %v, want its hash %s only", lines[1], rawTxHash)
	}
	if c, _ := lines[2]["params_clipped"].(string); len(c) != 64 || lines[2]["params_bytes"] != float64(len(long)) {
		t.Errorf("long params logged as %v", lines[2])
	}
}

// TestLineEscapes checks that a client's method cannot break a line.
func TestLineEscapes(t *testing.T) {
	c := call("x\"}\n{\"forged\":1,\xff"+strings.Repeat("m", 100), `[]`, nil)
	c.Batch = 3
	lines := logged(t, Config{}, c)
	if len(lines) != 1 || lines[0]["forged"] != nil || lines[0]["batch_index"] != 3.0 || lines[0]["client"] != "ip:unknown" {
		t.Fatalf("lines %v", lines)
	}
	if m := lines[0]["method"].(string); len(m) > maxMethod+len("...")+2 || !strings.HasPrefix(m, "x\"}\n") {
		t.Errorf("method logged as %q", m)
	}
}

// blockingWriter blocks every write until released, saying when one has
// begun.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	syncBuffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return w.syncBuffer.Write(p)
}

// TestDropsWhenFull checks that a call never waits for a stuck output:
// with the writer blocked and the queue full, lines are dropped and
// counted, and the queued ones are written once the output moves.
func TestDropsWhenFull(t *testing.T) {
	out := &blockingWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	l := New(Config{Buffer: 1}.WithDefaults(), out, nil, prometheus.NewRegistry(), keccakTx)
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Record(call("first", `[]`, nil)) // taken by the writer, which blocks writing it
	<-out.entered
	l.Record(call("queued", `[]`, nil)) // fills the queue of one
	start := time.Now()
	for range 5 {
		l.Record(call("dropped", `[]`, nil))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("recording into a full queue took %v", d)
	}
	if got := testutil.ToFloat64(l.dropped); got != 5 {
		t.Errorf("venn_request_log_dropped_total = %v, want 5", got)
	}
	close(out.release)
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := decodeLines(t, out.String())
	if len(lines) != 2 || lines[0]["method"] != "first" || lines[1]["method"] != "queued" {
		t.Errorf("written %v, want first and queued", lines)
	}
	if got := testutil.ToFloat64(l.written); got != 2 {
		t.Errorf("venn_request_log_lines_total = %v, want 2", got)
	}
}

// TestFileOutput checks that a file output is appended to, not truncated.
func TestFileOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.log")
	if err := os.WriteFile(path, []byte("{\"before\":true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := New(Config{Enabled: true, Output: path}.WithDefaults(), nil, nil, nil, keccakTx)
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Record(call("eth_chainId", `[]`, nil))
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := decodeLines(t, string(data))
	if len(lines) != 2 || lines[0]["before"] != true || lines[1]["method"] != "eth_chainId" {
		t.Errorf("file holds %s", data)
	}
	bad := New(Config{Output: filepath.Join(t.TempDir(), "no", "such", "dir")}.WithDefaults(), nil, nil, nil, keccakTx)
	if err := bad.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "request_log.output") {
		t.Errorf("unopenable output: %v", err)
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		give Config
		want string
	}{
		{Config{}, ""},
		{Config{Sample: 0.01}, ""},
		{Config{Sample: 1.5}, "sample: must be in (0, 1]"},
		{Config{Sample: -1}, "sample"},
		{Config{ParamsMaxBytes: -1}, "params_max_bytes"},
		{Config{Buffer: -3}, "buffer"},
	}
	for _, tt := range tests {
		err := tt.give.WithDefaults().Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: %v, want %q", tt.give, err, tt.want)
		}
	}
}

// TestSample checks that sample logs about that share of the calls.
func TestSample(t *testing.T) {
	calls := make([]jrpc.Call, 2000)
	for i := range calls {
		calls[i] = call("eth_chainId", `[]`, nil)
	}
	lines := logged(t, Config{Sample: 0.25, Buffer: len(calls)}, calls...)
	// 500 expected; outside 350..650 is a 7-sigma event.
	if n := len(lines); n < 350 || n > 650 {
		t.Errorf("%d of %d calls logged at sample 0.25", n, len(calls))
	}
}
