// Package e2e runs venn's whole stack (config, fx wiring, jrpc, router,
// remotes) in process in front of real geth v1.17.10 --dev nodes, and checks
// what a client sees. It owns no production code; helpers here start venn,
// talk JSON-RPC to it and to geth, and compare answers.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/internal/freeport"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// Bounds of the helpers. The machine is small and shared: generous enough
// not to flake, small enough that a hang fails well inside the package budget.
const (
	vennStartAttempts = 3
	vennStartTimeout  = 15 * time.Second
	vennStopTimeout   = 10 * time.Second
	readyTimeout      = 15 * time.Second
	requestTimeout    = 10 * time.Second
	maxReplyBytes     = 32 << 20
)

// chainName is the chain every test's venn serves.
const chainName = "dev"

// venn is one in-process venn.
type venn struct {
	app         *fx.App
	rpcAddr     string // host:port
	metricsAddr string
	grpcAddr    string // host:port of the gRPC listener; empty without vennOptions.grpc
	logs        *testkit.Buffer
}

// URL is the JSON-RPC over HTTP endpoint of chain.
func (v *venn) URL(chain string) string { return "http://" + v.rpcAddr + "/" + chain }

// WSURL is the JSON-RPC over WebSocket endpoint of chain.
func (v *venn) WSURL(chain string) string { return "ws://" + v.rpcAddr + "/" + chain }

// rootURL is venn's bare address with scheme ("http", "ws") and no path:
// every client's default URL, which serves the one chain.
func (v *venn) rootURL(scheme string) string { return scheme + "://" + v.rpcAddr }

// vennOptions shape the config startVenn writes.
type vennOptions struct {
	// limits is YAML for the limits section's body (two-space indented
	// lines), empty for the defaults.
	limits string
	// blockTime is the chain's block_time; empty for 1s.
	blockTime string
	// urls are more remotes, after nodes' and named on from them: each
	// an HTTP and a WebSocket URL (a node gethtest does not run).
	urls [][2]string
	// httpOnly gives nodes' remotes no ws_url: heads are polled, and
	// newPendingTransactions comes from a polled filter.
	httpOnly bool
	// chain names the chain; empty for chainName.
	chain string
	// top is YAML for more top-level sections (redis: ...), and inChain
	// for more of the chain's (four-space indented lines).
	top, inChain string
	// grpc turns on the gRPC listener (grpc_listen) on a free port.
	grpc bool
}

// startVenn starts venn with one chain, "dev", in front of nodes (named g1,
// g2, ... in order), and waits until /readyz says it can serve. It is
// stopped when the test ends.
func startVenn(t *testing.T, nodes []*gethtest.Geth, opts vennOptions) *venn {
	t.Helper()
	var errs []error
	for attempt := 1; attempt <= vennStartAttempts; attempt++ {
		v, err := tryStartVenn(t, nodes, opts)
		if err == nil {
			return v
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		// Only a port taken between picking and binding is worth a retry.
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	t.Fatalf("start venn: %v", errors.Join(errs...))
	return nil
}

func tryStartVenn(t *testing.T, nodes []*gethtest.Geth, opts vennOptions) (*venn, error) {
	ports, err := freeport.Ports(3)
	if err != nil {
		return nil, err
	}
	v := &venn{
		rpcAddr:     "127.0.0.1:" + strconv.Itoa(ports[0]),
		metricsAddr: "127.0.0.1:" + strconv.Itoa(ports[1]),
		logs:        &testkit.Buffer{},
	}
	var y strings.Builder
	fmt.Fprintf(&y, "listen: %s\nmetrics_listen: %s\nlog: {level: warn}\nshutdown_timeout: 5s\n", v.rpcAddr, v.metricsAddr)
	if opts.grpc {
		v.grpcAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
		fmt.Fprintf(&y, "grpc_listen: %s\n", v.grpcAddr)
	}
	if opts.limits != "" {
		fmt.Fprintf(&y, "limits:\n%s\n", opts.limits)
	}
	if opts.blockTime == "" {
		opts.blockTime = "1s"
	}
	if opts.chain == "" {
		opts.chain = chainName
	}
	if opts.top != "" {
		fmt.Fprintf(&y, "%s\n", opts.top)
	}
	fmt.Fprintf(&y, "chains:\n  - name: %s\n    chain_id: %d\n    block_time: %s\n", opts.chain, gethtest.ChainID, opts.blockTime)
	if opts.inChain != "" {
		fmt.Fprintf(&y, "%s\n", opts.inChain)
	}
	fmt.Fprintf(&y, "    remotes:\n")
	for i, g := range nodes {
		if opts.httpOnly {
			fmt.Fprintf(&y, "      - {name: g%d, url: %q}\n", i+1, g.HTTPURL())
			continue
		}
		fmt.Fprintf(&y, "      - {name: g%d, url: %q, ws_url: %q}\n", i+1, g.HTTPURL(), g.WSURL())
	}
	for i, u := range opts.urls {
		fmt.Fprintf(&y, "      - {name: g%d, url: %q, ws_url: %q}\n", len(nodes)+i+1, u[0], u[1])
	}
	cfg, err := app.Parse([]byte(y.String()))
	if err != nil {
		t.Fatalf("venn config: %v\n%s", err, y.String())
	}

	v.app = app.New(cfg, app.LogOutput(v.logs))
	if err := v.app.Err(); err != nil {
		t.Fatalf("venn wiring: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), vennStartTimeout)
	defer cancel()
	if err := v.app.Start(ctx); err != nil {
		// A failed Start has already rolled back what it started.
		return nil, fmt.Errorf("start: %w", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), vennStopTimeout)
		defer cancel()
		if err := v.app.Stop(ctx); err != nil {
			t.Errorf("stop venn: %v", err)
		}
		if t.Failed() {
			t.Logf("venn logs:\n%s", v.logs.String())
		}
	})
	v.waitReady(t)
	return v, nil
}

// waitReady polls /readyz until it answers 200.
func (v *venn) waitReady(t *testing.T) {
	t.Helper()
	var last string
	ok := testkit.Poll(readyTimeout, func() bool {
		status, body, err := httpGet("http://" + v.metricsAddr + "/readyz")
		last = fmt.Sprintf("HTTP %d %s %v", status, body, err)
		return err == nil && status == http.StatusOK
	})
	if !ok {
		t.Fatalf("venn not ready within %v: last /readyz: %s", readyTimeout, last)
	}
}

// metric returns the value of the first sample of name whose labels include
// every one of labels (like `remote="g1"`), and whether there was one.
func (v *venn) metric(t *testing.T, name string, labels ...string) (float64, bool) {
	t.Helper()
	for f := range v.samples(t, name, labels) {
		return f, true
	}
	return 0, false
}

// metricSum is the sum of every sample of name whose labels include every
// one of labels.
func (v *venn) metricSum(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for f := range v.samples(t, name, labels) {
		sum += f
	}
	return sum
}

// samples yields the value of each sample of name, scraped once, whose
// labels include every one of labels.
func (v *venn) samples(t *testing.T, name string, labels []string) iter.Seq[float64] {
	t.Helper()
	status, body, err := httpGet("http://" + v.metricsAddr + "/metrics")
	if err != nil || status != http.StatusOK {
		t.Fatalf("scrape /metrics: HTTP %d: %v", status, err)
	}
	return func(yield func(float64) bool) {
		for line := range strings.SplitSeq(string(body), "\n") {
			if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
				continue
			}
			series, value, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			sname, lbls, _ := strings.Cut(series, "{")
			if sname != name || !containsAll(lbls, labels) {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				t.Fatalf("metric %s: value %q: %v", line, value, err)
			}
			if !yield(f) {
				return
			}
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// rpcClient is the one client of the package's tests, set up once and never
// changed. Its pool is sized for the failover test's workers.
var rpcClient = &http.Client{
	Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	Timeout:   requestTimeout,
}

// post sends body to url as application/json and returns the HTTP status and
// the raw answer.
func post(url string, body []byte) (int, []byte, error) {
	return postReader(url, bytes.NewReader(body), int64(len(body)))
}

// postReader is post with a body of size bytes; size -1 sends it chunked,
// with no Content-Length.
func postReader(url string, body io.Reader, size int64) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		return 0, nil, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/json")
	resp, err := rpcClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	return resp.StatusCode, out, err
}

func httpGet(url string) (int, []byte, error) {
	resp, err := rpcClient.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	return resp.StatusCode, out, err
}

// reply is one decoded JSON-RPC answer.
type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// call makes one JSON-RPC call to url and returns the result, failing the
// test on any error.
func call(t *testing.T, url, method string, params ...any) json.RawMessage {
	t.Helper()
	res, err := tryCall(url, method, params...)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return res
}

// tryCall makes one JSON-RPC call and returns the result or an error that
// names what went wrong (transport, HTTP status, JSON-RPC error).
func tryCall(url, method string, params ...any) (json.RawMessage, error) {
	if params == nil {
		params = []any{}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	status, out, err := post(url, body)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	var r reply
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("HTTP %d, undecodable answer %.200q: %w", status, out, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", status, out)
	}
	if r.Error != nil {
		return nil, fmt.Errorf("JSON-RPC error %d: %s", r.Error.Code, r.Error.Message)
	}
	if r.Result == nil {
		return nil, fmt.Errorf("answer has neither result nor error: %s", out)
	}
	return r.Result, nil
}

// normalize re-encodes a JSON document so that two answers that differ
// only in whitespace or key order compare equal.
func normalize(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("decode %.200q: %w", raw, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// quantity decodes a JSON hex quantity like "0x1a".
func quantity(t *testing.T, raw json.RawMessage) uint64 {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("quantity %s: %v", raw, err)
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil || !strings.HasPrefix(s, "0x") {
		t.Fatalf("quantity %q: not a 0x hex number", s)
	}
	return n
}
