package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// asCommandEnv makes the test binary behave as vennbench, so the bench can
// re-execute it as its upstream and proxy children.
const asCommandEnv = "VENNBENCH_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asCommandEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { removeVennBinary() }))
}

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    [2]time.Duration // user, system
		wantErr bool
	}{
		{
			name: "plain",
			give: "1234 (venn) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 100 1000 10 18446744073709551615",
			want: [2]time.Duration{2500 * time.Millisecond, 750 * time.Millisecond},
		},
		{
			name: "command with spaces and parens",
			give: "99 (a b) (c)) R 1 99 99 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 10 1 0",
			want: [2]time.Duration{70 * time.Millisecond, 30 * time.Millisecond},
		},
		{name: "no command", give: "1234 venn S 1", wantErr: true},
		{name: "truncated", give: "1234 (venn) S 1 2 3", wantErr: true},
		{name: "not a number", give: "1 (x) S 1 1 1 0 -1 0 0 0 0 0 x 3 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user, sys, err := parseStatCPU([]byte(tt.give))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got := [2]time.Duration{user, sys}; got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCPUTimeOfSelfGrows(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the tick-granular counter moves, bounded in time.
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
		after, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
	}
	t.Fatalf("cpu time did not grow from %v in 5s (%d)", before, x)
}

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name string
		give []time.Duration
		p    float64
		want time.Duration
	}{
		{name: "empty", give: nil, p: 50, want: 0},
		{name: "one", give: ms(7), p: 99, want: 7 * time.Millisecond},
		{name: "p50 of 1..100", give: hundred, p: 50, want: 50 * time.Millisecond},
		{name: "p99 of 1..100", give: hundred, p: 99, want: 99 * time.Millisecond},
		{name: "p100", give: hundred, p: 100, want: 100 * time.Millisecond},
		{name: "p50 of 4", give: ms(1, 2, 3, 4), p: 50, want: 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.give, tt.p); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		give []float64
		want float64
	}{
		{give: []float64{3, 1, 2}, want: 2},
		{give: []float64{4, 1, 3, 2}, want: 2.5},
		{give: []float64{5}, want: 5},
	}
	for _, tt := range tests {
		if got := median(tt.give); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

func TestCheckReply(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		wantErr string
	}{
		{name: "result", give: `{"jsonrpc":"2.0","id":7,"result":"0x1bc16d674ec80000"}`},
		{name: "zero", give: `{"jsonrpc":"2.0","id":7,"result":"0x0"}`},
		{name: "error", give: `{"jsonrpc":"2.0","id":7,"error":{"code":-32050,"message":"no remote"}}`, wantErr: "error reply"},
		{name: "wrong id", give: `{"jsonrpc":"2.0","id":8,"result":"0x1"}`, wantErr: "reply id"},
		{name: "string id", give: `{"jsonrpc":"2.0","id":"7","result":"0x1"}`, wantErr: "reply id"},
		{name: "null result", give: `{"jsonrpc":"2.0","id":7,"result":null}`, wantErr: "not a quantity"},
		{name: "object result", give: `{"jsonrpc":"2.0","id":7,"result":{}}`, wantErr: "not a quantity"},
		{name: "not json", give: `<html>bad gateway</html>`, wantErr: "not JSON-RPC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkReply([]byte(tt.give), 7)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestAppendRequestFreshAddress(t *testing.T) {
	l, err := newLoader()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for n := uint64(1); n <= 300; n++ {
		var req struct {
			JSONRPC string
			ID      uint64
			Method  string
			Params  []string
		}
		b := l.appendRequest(nil, n)
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("request %d is not JSON: %v: %s", n, err, b)
		}
		if req.ID != n || req.Method != "eth_getBalance" || len(req.Params) != 2 || req.Params[1] != "latest" {
			t.Fatalf("request %d: %+v", n, req)
		}
		addr := req.Params[0]
		if len(addr) != 42 || !strings.HasPrefix(addr, "0x") {
			t.Fatalf("address %q is not 20 bytes of hex", addr)
		}
		if seen[addr] {
			t.Fatalf("address %s repeated", addr)
		}
		seen[addr] = true
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name        string
		give        []string
		wantCode    int
		wantConc    []int
		wantTargets []string
	}{
		{name: "defaults", give: nil, wantCode: -1, wantConc: []int{1, 32, 128}, wantTargets: []string{"direct", "proxy", "venn"}},
		{name: "targets reordered", give: []string{"-targets", "venn,direct"}, wantCode: -1, wantConc: []int{1, 32, 128}, wantTargets: []string{"direct", "venn"}},
		{name: "conc", give: []string{"-conc", "2, 8"}, wantCode: -1, wantConc: []int{2, 8}, wantTargets: []string{"direct", "proxy", "venn"}},
		{name: "zero conc", give: []string{"-conc", "0"}, wantCode: exitUsage},
		{name: "huge conc", give: []string{"-conc", "5000"}, wantCode: exitUsage},
		{name: "bad target", give: []string{"-targets", "nginx"}, wantCode: exitUsage},
		{name: "zero rounds", give: []string{"-rounds", "0"}, wantCode: exitUsage},
		{name: "zero duration", give: []string{"-duration", "0s"}, wantCode: exitUsage},
		{name: "extra arg", give: []string{"now"}, wantCode: exitUsage},
		{name: "help", give: []string{"-h"}, wantCode: exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cfg, code := parseBenchFlags(tt.give, &stderr)
			if code != tt.wantCode {
				t.Fatalf("code = %d, want %d (stderr: %s)", code, tt.wantCode, stderr.String())
			}
			if code != -1 {
				return
			}
			if !slices.Equal(cfg.Conc, tt.wantConc) || !slices.Equal(cfg.Targets, tt.wantTargets) {
				t.Errorf("conc %v targets %v, want %v %v", cfg.Conc, cfg.Targets, tt.wantConc, tt.wantTargets)
			}
		})
	}
}

// serve runs h on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String() + "/"
}

// The load generator drives a real hop without errors and records one
// latency per answered call.
func TestLoaderThroughPlainProxy(t *testing.T) {
	node := fakenode.New(fakenode.Options{ChainID: benchChainID})
	t.Cleanup(node.Close)
	upURL := serve(t, node.Handler())
	target, err := url.Parse(upURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newPlainProxy(target)
	t.Cleanup(proxy.Transport.(*http.Transport).CloseIdleConnections)
	proxyURL := serve(t, proxy)

	l, err := newLoader()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.closeIdle)
	start := time.Now()
	res := l.run(context.Background(), proxyURL, 4, 300*time.Millisecond)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a 300ms window took %v", took)
	}
	if res.Errors != 0 || res.OK == 0 {
		t.Fatalf("ok %d errors %d: %v", res.OK, res.Errors, res.ErrSample)
	}
	if len(res.Latencies) != res.OK {
		t.Errorf("%d latencies for %d calls", len(res.Latencies), res.OK)
	}
	if p50, p99 := percentile(res.Latencies, 50), percentile(res.Latencies, 99); p50 <= 0 || p99 < p50 {
		t.Errorf("p50 %v p99 %v", p50, p99)
	}
}

// A target that answers errors is counted, not hidden.
func TestLoaderCountsErrors(t *testing.T) {
	bad := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}`))
	}))
	l, err := newLoader()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.closeIdle)
	res := l.run(context.Background(), bad, 2, 100*time.Millisecond)
	if res.OK != 0 || res.Errors == 0 || len(res.ErrSample) == 0 {
		t.Fatalf("ok %d errors %d samples %v", res.OK, res.Errors, res.ErrSample)
	}
}

// The whole command runs the direct and proxy targets through its child
// processes and prints a table with both, with no failed calls.
func TestBenchDirectAndProxy(t *testing.T) {
	t.Setenv(asCommandEnv, "1")
	var stdout, stderr bytes.Buffer
	code := run([]string{
		"-duration", "300ms", "-warmup", "100ms", "-rounds", "2",
		"-conc", "1,4", "-targets", "direct,proxy",
	}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"| direct | 1 |", "| proxy | 1 |", "| direct | 4 |", "| proxy | 4 |", "Errors: none", "Goals: not evaluated"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The proxy row carries a CPU figure of its own, and neither hop adds
	// upstream requests: one HTTP request reaches the upstream per call.
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, "| proxy |") && !strings.HasPrefix(line, "| direct |") {
			continue
		}
		cols := strings.Split(line, "|")
		if strings.HasPrefix(line, "| proxy | 4 |") {
			if v, err := strconv.ParseFloat(strings.TrimSpace(cols[6]), 64); err != nil || v <= 0 {
				t.Errorf("proxy CPU/req %q is not positive: %s", cols[6], line)
			}
		}
		if got := strings.TrimSpace(cols[8]); got != "1.00" {
			t.Errorf("upstream requests per call %q, want 1.00: %s", got, line)
		}
	}
}

// stop ends a child and reaps it, so no process outlives the bench.
func TestChildStop(t *testing.T) {
	t.Setenv(asCommandEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, u, err := startChild(context.Background(), "upstream", true, exe, "upstream", "-listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Errorf("url %q", u)
	}
	c.Stop()
	if done, _ := c.Exited(); !done {
		t.Fatal("child still running after stop")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(c.Pid())); err == nil {
		t.Errorf("process %d still exists", c.Pid())
	}
	c.Stop() // idempotent
}
