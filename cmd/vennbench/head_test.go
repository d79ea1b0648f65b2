package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/cluster"
)

var (
	vennOnce sync.Once
	vennDir  string
	vennBin  string
	vennErr  error
)

// vennBinary builds cmd/venn once for the cluster tests; TestMain removes
// it.
func vennBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server not found: install Debian's redis-server package (scripts/test.sh does)")
	}
	vennOnce.Do(func() {
		if vennDir, vennErr = os.MkdirTemp("", "vennbench-test-"); vennErr != nil {
			return
		}
		vennBin = filepath.Join(vennDir, "venn")
		vennErr = cluster.BuildVenn(context.Background(), vennBin)
	})
	if vennErr != nil {
		t.Fatal(vennErr)
	}
	return vennBin
}

func removeVennBinary() {
	if vennDir != "" {
		_ = os.RemoveAll(vennDir)
	}
}

// children lists the processes whose parent is this one.
func children(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == self {
			out = append(out, e.Name()+" "+string(b[:i+1]))
		}
	}
	return out
}

// tableRow returns the cells of the first table row of out that starts
// with prefix.
func tableRow(t *testing.T, out, prefix string) []string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			return cells
		}
	}
	t.Fatalf("no row %q in:\n%s", prefix, out)
	return nil
}

func cellFloat(t *testing.T, cells []string, i int) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(cells[i], 64)
	if err != nil {
		t.Fatalf("cell %d of %v: %v", i, cells, err)
	}
	return v
}

// The head mode runs a real cluster (redis-server, leader, follower) with
// the proxy beside it and reports every call, target and concurrency; the
// follower answers from its window and leaves the upstream alone, and no
// process outlives the run.
func TestHeadBench(t *testing.T) {
	t.Setenv(asCommandEnv, "1")
	bin := vennBinary(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"head", "-venn", bin,
		"-duration", "300ms", "-warmup", "100ms", "-rounds", "1", "-conc", "1,4",
		"-calls", "blockNumber,logs-filter", "-block-time", "200ms",
	}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"Errors: none",
		"| throughput follower ÷ proxy at c=4, blockNumber |",
		"| throughput follower ÷ proxy at c=4, logs-filter |",
		"| blockNumber | 1 |", "| logs-filter | 4 |", // the ratio table
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// Columns: call, target, conc, req/s, p50, p99, target CPU, upstream
	// CPU, leader+redis CPU, load CPU, upstream req/call, from window, errors.
	for _, call := range []string{"blockNumber", "logs-filter"} {
		for _, conc := range []string{"1", "4"} {
			f := tableRow(t, out, "| "+call+" | follower | "+conc+" |")
			if v := cellFloat(t, f, 11); v < 0.99 {
				t.Errorf("%s c=%s: %.4f of the follower's calls from its window, want all: %v", call, conc, v, f)
			}
			if v := cellFloat(t, f, 10); v > 0.05 {
				t.Errorf("%s c=%s: follower makes %.4f upstream requests per call, want ~0: %v", call, conc, v, f)
			}
			if v := cellFloat(t, f, 3); v <= 0 {
				t.Errorf("%s c=%s: follower req/s %v", call, conc, f)
			}
			p := tableRow(t, out, "| "+call+" | proxy | "+conc+" |")
			// One request per call, plus the leader's few per block.
			if v := cellFloat(t, p, 10); v < 0.99 || v > 1.2 {
				t.Errorf("%s c=%s: proxy makes %.4f upstream requests per call, want ~1: %v", call, conc, v, p)
			}
			if p[8] != "—" || p[11] != "—" {
				t.Errorf("proxy row has follower-only cells: %v", p)
			}
		}
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// The propagation mode mines blocks, times them to every replica and
// reads venn's own histograms over the same blocks.
func TestPropagationBench(t *testing.T) {
	t.Setenv(asCommandEnv, "1")
	bin := vennBinary(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"propagation", "-venn", bin, "-blocks", "6", "-skip", "1", "-gap", "20ms", "-followers", "2"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	var leader, last float64
	for _, tt := range []struct {
		prefix string
		to     *float64
	}{
		{prefix: "| the leader asks the upstream for the block"},
		{prefix: "| the leader asks for its receipts"},
		{prefix: "| the leader serves it |", to: &leader},
		{prefix: "| follower f1 serves it |"},
		{prefix: "| follower f2 serves it |"},
		{prefix: "| **every follower serves it (the last one)** |", to: &last},
		{prefix: "| every replica serves it |"},
	} {
		cells := tableRow(t, out, tt.prefix)
		p50, p99 := cellFloat(t, cells, 1), cellFloat(t, cells, 2)
		if p50 <= 0 || p99 < p50 {
			t.Errorf("p50 %v p99 %v: %v", p50, p99, cells)
		}
		if tt.to != nil {
			*tt.to = cellFloat(t, cells, 4) // max
		}
	}
	if leader <= 0 || last <= 0 {
		t.Errorf("leader max %v, last follower max %v", leader, last)
	}
	fetch := tableRow(t, out, "| venn_stalker_fetch_seconds")
	if fetch[1] != "leader" || fetch[2] != "6" {
		t.Errorf("leader's fetch histogram over the measured blocks: %v", fetch)
	}
	for _, id := range []string{"leader", "f1", "f2"} {
		found := false
		for line := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(line, "| venn_head_propagation_seconds") && strings.Contains(line, "| "+id+" | 6 |") {
				found = true
			}
		}
		if !found {
			t.Errorf("no propagation histogram row with 6 observations for %s:\n%s", id, out)
		}
	}
	if left := children(t); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
	}
}

// The upstream's control endpoint mines one block and sees the leader's
// fetches of it; -block-time keeps its chain moving.
func TestUpstreamControl(t *testing.T) {
	t.Setenv(asCommandEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	up, u, err := startChild(context.Background(), "upstream", true, exe, "upstream", "-listen", "127.0.0.1:0", "-control", "-block-time", "50ms")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Stop()
	l, err := newLoader()
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	pr := &propRun{l: l, upURL: u}
	p := newPoller(&replica{url: u}, 0)
	defer p.client.CloseIdleConnections()
	ctx := context.Background()

	start, err := p.blockNumber(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, up, 5*time.Second, func() error {
		n, err := p.blockNumber(ctx, u)
		if err == nil && n < start+2 {
			err = errors.New("not yet")
		}
		return err
	}); err != nil {
		t.Fatalf("-block-time: the chain did not move from %d: %v", start, err)
	}

	var m mined
	if err := pr.post(ctx, minePath, &m); err != nil {
		t.Fatal(err)
	}
	if m.Number <= start || math.Abs(float64(time.Now().UnixNano()-m.At)) > float64(5*time.Second) {
		t.Fatalf("mined %+v (head was %d)", m, start)
	}
	var f fetched
	if err := pr.get(ctx, fetchedPath, &f); err != nil {
		t.Fatal(err)
	}
	if f.Number != m.Number || f.BlockAt != 0 {
		t.Fatalf("before any fetch: %+v", f)
	}
	// The stalker's two fetches, as it sends them.
	var blk struct {
		Hash string `json:"hash"`
	}
	rpc := func(method, params string, out any) {
		t.Helper()
		body := fixedRequest(method, params)(nil, 1)
		resp, err := http.Post(u, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var msg struct{ Result json.RawMessage }
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
			t.Fatal(err)
		}
		if out != nil {
			if err := json.Unmarshal(msg.Result, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	rpc("eth_getBlockByNumber", `["0x`+strconv.FormatUint(m.Number, 16)+`",false]`, nil) // not the stalker's shape
	if err := pr.get(ctx, fetchedPath, &f); err != nil || f.BlockAt != 0 {
		t.Fatalf("a hash-only fetch counted: %+v %v", f, err)
	}
	rpc("eth_getBlockByNumber", `["0x`+strconv.FormatUint(m.Number, 16)+`",true]`, &blk)
	rpc("eth_getBlockReceipts", `["`+blk.Hash+`"]`, nil)
	if err := pr.get(ctx, fetchedPath, &f); err != nil {
		t.Fatal(err)
	}
	if f.BlockAt < m.At || f.ReceiptsAt < f.BlockAt {
		t.Fatalf("fetch times %+v, mined at %d", f, m.At)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestParseHeadFlags(t *testing.T) {
	tests := []struct {
		name        string
		give        []string
		wantCode    int
		wantCalls   []string
		wantTargets []string
	}{
		{name: "defaults", wantCode: -1, wantCalls: []string{"blockNumber", "block", "logs", "logs-filter"}, wantTargets: []string{"proxy", "follower"}},
		{name: "reordered", give: []string{"-calls", "logs,blockNumber", "-targets", "follower,direct"}, wantCode: -1,
			wantCalls: []string{"blockNumber", "logs"}, wantTargets: []string{"direct", "follower"}},
		{name: "unknown call", give: []string{"-calls", "eth_call"}, wantCode: exitUsage},
		{name: "venn is not a head target", give: []string{"-targets", "venn"}, wantCode: exitUsage},
		{name: "block time too short", give: []string{"-block-time", "1ms"}, wantCode: exitUsage},
		{name: "zero rounds", give: []string{"-rounds", "0"}, wantCode: exitUsage},
		{name: "extra arg", give: []string{"now"}, wantCode: exitUsage},
		{name: "help", give: []string{"-h"}, wantCode: exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, code := parseHeadFlags(tt.give, &stderr)
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d (stderr: %s)", code, tt.wantCode, stderr.String())
			}
			if code != -1 {
				return
			}
			var calls []string
			for _, c := range cfg.Calls {
				calls = append(calls, c.name)
			}
			if strings.Join(calls, ",") != strings.Join(tt.wantCalls, ",") || strings.Join(cfg.Targets, ",") != strings.Join(tt.wantTargets, ",") {
				t.Errorf("calls %v targets %v, want %v %v", calls, cfg.Targets, tt.wantCalls, tt.wantTargets)
			}
		})
	}
}

func TestParsePropagationFlags(t *testing.T) {
	tests := []struct {
		name     string
		give     []string
		wantCode int
	}{
		{name: "defaults", wantCode: -1},
		{name: "set", give: []string{"-blocks", "10", "-followers", "3", "-poll", "0s", "-gap", "0s"}, wantCode: -1},
		{name: "no blocks", give: []string{"-blocks", "0"}, wantCode: exitUsage},
		{name: "no followers", give: []string{"-followers", "0"}, wantCode: exitUsage},
		{name: "negative poll", give: []string{"-poll", "-1ms"}, wantCode: exitUsage},
		{name: "help", give: []string{"-h"}, wantCode: exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if _, code := parsePropagationFlags(tt.give, &stderr); code != tt.wantCode {
				t.Fatalf("code = %d, want %d (stderr: %s)", code, tt.wantCode, stderr.String())
			}
		})
	}
}

// Every head call is valid JSON-RPC, and its checker takes the fake
// node's answer shapes and refuses others.
func TestHeadCallChecks(t *testing.T) {
	for _, c := range headCalls {
		var req struct {
			ID     uint64            `json:"id"`
			Method string            `json:"method"`
			Params []json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(c.request(nil, 42), &req); err != nil || req.ID != 42 || req.Method == "" {
			t.Errorf("%s: request %s: %v", c.name, c.request(nil, 42), err)
		}
	}
	block := `{"number":"0x65","hash":"0x` + strings.Repeat("ab", 32) + `","transactions":[]}`
	tests := []struct {
		name    string
		check   func([]byte) error
		give    string
		wantErr bool
	}{
		{name: "quantity", check: checkQuantity, give: `"0x65"`},
		{name: "quantity empty", check: checkQuantity, give: `"0x"`, wantErr: true},
		{name: "quantity not hex", check: checkQuantity, give: `"0xzz"`, wantErr: true},
		{name: "block", check: checkBlock, give: block},
		{name: "block null", check: checkBlock, give: `null`, wantErr: true},
		{name: "block without hash", check: checkBlock, give: `{"number":"0x65"}`, wantErr: true},
		{name: "logs", check: checkLogs(true), give: `[{"address":"0x1"}]`},
		{name: "logs empty, wanted some", check: checkLogs(true), give: `[]`, wantErr: true},
		{name: "logs empty", check: checkLogs(false), give: `[]`},
		{name: "logs not a list", check: checkLogs(false), give: `{}`, wantErr: true},
		{name: "logs of strings", check: checkLogs(false), give: `["0x1"]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.check([]byte(tt.give)); (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestScrapeAndHistogram(t *testing.T) {
	const text = `# HELP venn_answers_total Calls.
# TYPE venn_answers_total counter
venn_answers_total{chain="bench",source="head"} 1234
venn_answers_total{chain="bench",source="remotes"} 5
venn_head_propagation_seconds_bucket{chain="bench",le="0.001"} 10
venn_head_propagation_seconds_bucket{chain="bench",le="0.0005"} 4
venn_head_propagation_seconds_bucket{chain="bench",le="0.0025"} 20
venn_head_propagation_seconds_bucket{chain="bench",le="+Inf"} 20
venn_head_propagation_seconds_sum{chain="bench"} 0.03
venn_head_propagation_seconds_count{chain="bench"} 20
`
	u := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(text)) }))
	m, err := scrape(context.Background(), http.DefaultClient, u)
	if err != nil {
		t.Fatal(err)
	}
	defer http.DefaultClient.CloseIdleConnections()
	if m.answers("head") != 1234 || m.answers("remotes") != 5 || m.answers("local") != 0 {
		t.Errorf("answers: %v", m)
	}
	h := m.histogram("venn_head_propagation_seconds")
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{name: "count", got: h.count, want: 20},
		{name: "mean", got: h.mean(), want: 0.0015},
		{name: "p10 in the first bucket", got: h.quantile(0.1), want: 0.0005 * 2 / 4},
		{name: "p50 in the second", got: h.quantile(0.5), want: 0.0005 + 0.0005*(10-4)/6},
		{name: "p99 in the third", got: h.quantile(0.99), want: 0.001 + 0.0015*(19.8-10)/10},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	earlier := histogram{les: h.les, counts: []float64{4, 10, 10, 10}, sum: 0.01, count: 10}
	d := h.since(earlier)
	if d.count != 10 || math.Abs(d.sum-0.02) > 1e-12 || d.counts[0] != 0 || d.counts[2] != 10 {
		t.Errorf("since: %+v", d)
	}
	if v := (histogram{}).quantile(0.5); !math.IsNaN(v) {
		t.Errorf("empty quantile = %v", v)
	}
}
