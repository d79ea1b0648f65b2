package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/usage"
)

// BenchmarkTenantCost is venn's stack (jrpc with metrics, router, pool, a
// fake node over HTTP) three ways, interleaved round by round as
// BenchmarkTracingCost does: "off", jrpc without a gate; "open", through
// an edge with nothing configured, which is what venn serves with auth off
// (the app always wires its edge in); and "jwt", a JWT-authenticated
// tenant whose calls are priced, spent from per-minute and per-month
// budgets and recorded for usage. Three calls: eth_getBalance at latest, passed through to the node;
// eth_chainId, which venn answers itself (the cheapest answer, so the
// largest share for the edge); and eth_getBlockByNumber latest, answered
// from the head window (priced as served from the head). It reports each
// target's process CPU per call (median over rounds) and the medians of
// the per-round ratios jwt/off and jwt/open.
//
// Sub-benchmarks by client: "bare" is a bare HTTP/1.1 one (bareClient),
// so that the process's CPU is venn's, the fake node's (pass) and the
// loopback's; "nethttp" is net/http's, as this benchmark had first, which
// adds the client's own work to both sides (about half of a head-served
// call's instructions) and parses in this process the credit header only
// the tenant's answers carry: work a real client does
// elsewhere, counted against venn. "bare" is the figure.
func BenchmarkTenantCost(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchTenantCost(b, true) })
	b.Run("nethttp", func(b *testing.B) { benchTenantCost(b, false) })
}

func benchTenantCost(b *testing.B, bare bool) {
	const segment = 256
	node := fakenode.New(fakenode.Options{ChainID: 1})
	up := httptest.NewServer(node.Handler())
	b.Cleanup(up.Close)
	tok, cfg := tenantEdgeConfig(b)
	off := tenantVenn(b, up.URL, nil)
	rec := usage.NewRecorder(usage.RecorderOptions{Registerer: prometheus.NewRegistry()})
	gate := edge.New(cfg, edge.Options{Usage: rec, Registerer: prometheus.NewRegistry()})
	on := tenantVenn(b, up.URL, gate)
	openGate := edge.New(edge.Config{}, edge.Options{Registerer: prometheus.NewRegistry()})
	open := tenantVenn(b, up.URL, openGate)
	headOff, headOn, headOpen := tenantHeadVenn(b, nil), tenantHeadVenn(b, gate), tenantHeadVenn(b, openGate)
	type target struct{ name, url, method string }
	// By call: off, jwt, open.
	targets := []target{
		{"pass-off", off, "eth_getBalance"}, {"pass-jwt", on, "eth_getBalance"}, {"pass-open", open, "eth_getBalance"},
		{"local-off", off, "eth_chainId"}, {"local-jwt", on, "eth_chainId"}, {"local-open", open, "eth_chainId"},
		{"head-off", headOff, "eth_getBlockByNumber"}, {"head-jwt", headOn, "eth_getBlockByNumber"},
		{"head-open", headOpen, "eth_getBlockByNumber"},
	}
	calls := make([]func(int) []byte, len(targets))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for i, tg := range targets {
		if bare {
			c := dialBare(b, tg.url, tok)
			calls[i] = func(id int) []byte { return c.call(b, tg.method, id) }
		} else {
			calls[i] = func(id int) []byte { return tenantCall(b, client, tg.url, tg.method, tok, id) }
		}
	}
	for _, i := range []int{6, 7, 8} {
		if got := calls[i](0); !bytes.Contains(got, []byte(benchWindowHash(benchWindowHead))) {
			b.Fatalf("eth_getBlockByNumber latest not answered from the window: %s", got)
		}
	}
	cpu := make([][]float64, len(targets))
	round, id := 0, 0
	for b.Loop() {
		for k := range targets {
			t := (k + round) % len(targets)
			c0 := processCPU(b)
			for range segment {
				id++
				calls[t](id)
			}
			cpu[t] = append(cpu[t], float64(processCPU(b)-c0)/segment)
		}
		round++
	}
	for t, tg := range targets {
		b.ReportMetric(median(cpu[t]), tg.name+"-cpu-ns/call")
	}
	for c := 0; c < len(targets); c += 3 {
		for _, pair := range [][2]int{{c, c + 1}, {c + 2, c + 1}} {
			r := make([]float64, round)
			for i := range round {
				r[i] = cpu[pair[1]][i] / cpu[pair[0]][i]
			}
			base := targets[pair[0]].name
			b.ReportMetric(median(r), targets[pair[1]].name+"/"+base[strings.LastIndexByte(base, '-')+1:])
		}
	}
	if len(rec.Pending()) == 0 {
		b.Fatal("no usage recorded")
	}
}

// BenchmarkTenantTarget is one of BenchmarkTenantCost's targets set up
// and run alone, one call an iteration, so that a CPU or allocation
// profile (-cpuprofile, -memprofile, -benchmem: the whole process, the
// client included) shows one side, to compare with pprof -diff_base or
// callgrind's counts. The client is BenchmarkTenantCost's bare one, or
// net/http's with the suffix "-nethttp". "head-open" is head-off's call
// through an edge with nothing configured, as venn serves with auth off
// (its gate is always there: the method blocklist, CORS):
//
//	go test -run '^$' -bench 'BenchmarkTenantTarget/head-jwt$' -cpuprofile /tmp/jwt.prof ./e2e
func BenchmarkTenantTarget(b *testing.B) {
	var names []string
	for _, n := range []string{"pass-off", "pass-jwt", "local-off", "local-jwt", "head-off", "head-jwt", "head-open"} {
		names = append(names, n, n+"-nethttp")
	}
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			name, bare := strings.CutSuffix(name, "-nethttp")
			bare = !bare
			tok, cfg := tenantEdgeConfig(b)
			var gate *edge.Edge
			switch name[strings.LastIndexByte(name, '-')+1:] {
			case "jwt":
				rec := usage.NewRecorder(usage.RecorderOptions{Registerer: prometheus.NewRegistry()})
				gate = edge.New(cfg, edge.Options{Usage: rec, Registerer: prometheus.NewRegistry()})
			case "open":
				gate = edge.New(edge.Config{}, edge.Options{Registerer: prometheus.NewRegistry()})
			}
			url, method := "", "eth_getBalance"
			switch name[:4] {
			case "pass", "loca":
				node := fakenode.New(fakenode.Options{ChainID: 1})
				up := httptest.NewServer(node.Handler())
				b.Cleanup(up.Close)
				url = tenantVenn(b, up.URL, gate)
				if name[:4] == "loca" {
					method = "eth_chainId"
				}
			default:
				url, method = tenantHeadVenn(b, gate), "eth_getBlockByNumber"
			}
			var call func(int)
			if bare {
				c := dialBare(b, url, tok)
				call = func(id int) { c.call(b, method, id) }
			} else {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				defer client.CloseIdleConnections()
				call = func(id int) { tenantHop(b, client, url, method, tok, id) }
			}
			call(0)
			b.ReportAllocs()
			id := 0
			for b.Loop() {
				id++
				call(id)
			}
		})
	}
}

// tenantEdgeConfig is a tenant behind a JWT (a static ES256 key) with
// budgets the benchmarks never reach, and the token. The budgets are a
// large team's, as an operator would set them (benchBudget), so that the
// credit header carries numbers of the length it does in production.
func tenantEdgeConfig(b *testing.B) (string, edge.Config) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	file := filepath.Join(b.TempDir(), "jwt.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		b.Fatal(err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"tenant": "team-a", "aud": "venn",
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString(k)
	if err != nil {
		b.Fatal(err)
	}
	return tok, edge.Config{
		Auth:    edge.AuthConfig{JWT: edge.JWTConfig{Keys: []string{file}, Algorithms: []string{"ES256"}, Audience: "venn"}},
		Tenants: []edge.Tenant{{Name: "team-a", Credits: benchBudget}},
	}
}

// benchBudget is a large tenant's: ten million credits a minute (a
// million calls of 10 credits, about 17,000 a second) and ten billion a
// month (about 380 such calls a second all month). These benchmarks spend
// well under it (a call of this process costs 40 µs or more, and at most
// 10 credits). Budgets of 2^50 and 2^60, as they had, printed 35 digits in
// every credit header rather than 17, a length no tenant's header has.
var benchBudget = edge.Budget{PerMinute: 10_000_000, PerMonth: 10_000_000_000}

// tenantVenn serves venn's stack in front of upstream behind gate (nil:
// none, auth off).
func tenantVenn(b *testing.B, upstream string, gate *edge.Edge) string {
	reg := prometheus.NewRegistry()
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "eth", ChainID: 1, BlockTime: time.Hour},
		[]remotes.Config{{Name: "a", URL: upstream}}, nil, remotes.NewMetrics(reg))
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	opts := jrpc.Options{Registerer: reg, MethodLabel: evm.MethodLabel}
	if gate != nil {
		opts.Gate = gate
	}
	srv := jrpc.NewServer(opts)
	srv.Handle("eth", router.New(router.Config{Chain: "eth", ChainID: 1}, nil, router.UpstreamOf(pool, pool.Heads()), nil))
	var h http.Handler = srv.Handler()
	if gate != nil {
		h = gate.Wrap(h)
	}
	venn := httptest.NewServer(h)
	b.Cleanup(func() {
		venn.Close()
		_ = pool.Stop(context.Background())
	})
	return venn.URL + "/eth"
}

// tenantHop calls method at url with the bearer token.
func tenantHop(b *testing.B, client *http.Client, url, method, tok string, i int) {
	_ = tenantCall(b, client, url, method, tok, i)
}

// tenantCall calls method at url with the bearer token; the answer.
func tenantCall(b *testing.B, client *http.Client, url, method, tok string, i int) []byte {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(tenantBody(method, i))))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	return out
}

// tenantBody is the JSON-RPC call of method with id i.
func tenantBody(method string, i int) string {
	switch method {
	case "eth_chainId":
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_chainId","params":[]}`, i)
	case "eth_getBlockByNumber":
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["latest",false]}`, i)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"%s","params":["0x%040x","latest"]}`, i, method, i)
}

// bareClient is an HTTP/1.1 client on one kept-alive connection that
// reads of an answer only its status and Content-Length: what it costs
// is the same whatever headers the answer carries.
type bareClient struct {
	conn net.Conn
	br   *bufio.Reader
	head string // the request line and headers, up to Content-Length's value
	req  []byte
	body []byte
}

func dialBare(b *testing.B, rawURL, tok string) *bareClient {
	u, err := url.Parse(rawURL)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return &bareClient{conn: conn, br: bufio.NewReaderSize(conn, 16<<10),
		head: "POST " + u.Path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\n" +
			"Authorization: Bearer " + tok + "\r\nContent-Length: "}
}

// call sends method with id i and returns the answer's body (valid until
// the next call).
func (c *bareClient) call(b *testing.B, method string, i int) []byte {
	body := tenantBody(method, i)
	c.req = append(append(strconv.AppendInt(append(c.req[:0], c.head...), int64(len(body)), 10), "\r\n\r\n"...), body...)
	if _, err := c.conn.Write(c.req); err != nil {
		b.Fatal(err)
	}
	size := -1
	for first := true; ; first = false {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if first {
			if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
				b.Fatalf("status line %q", line)
			}
			continue
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && line[14] == ':' && bytes.EqualFold(line[:14], []byte("Content-Length")) {
			n, err := strconv.Atoi(string(bytes.TrimSpace(line[15:])))
			if err != nil {
				b.Fatal(err)
			}
			size = n
		}
	}
	if size < 0 {
		b.Fatal("answer without Content-Length")
	}
	c.body = slices.Grow(c.body[:0], size)[:size]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		b.Fatal(err)
	}
	return c.body
}

// The head window of tenantHeadVenn: blocks 1..benchWindowHead.
const benchWindowHead = 8

func benchWindowHash(n uint64) string { return fmt.Sprintf("0x%064x", n+0xb10c) }

// windowRemotes stand for remotes at the window's head that are never
// asked: a call the window does not answer fails. Their heads say nothing
// of the window's hash or age.
type windowRemotes struct{}

func (windowRemotes) HealthyHead() uint64                       { return benchWindowHead }
func (windowRemotes) HashAt(uint64) (string, bool)              { return "", false }
func (windowRemotes) Reports(uint64, string) bool               { return false }
func (windowRemotes) HeardWithin(time.Time, time.Duration) bool { return true }
func (windowRemotes) BlockTime() time.Duration                  { return time.Second }

func (windowRemotes) ServeCall(context.Context, evm.Call) (json.RawMessage, error) {
	return nil, &jrpc.Error{Code: -32000, Message: "not answered from the window"}
}

// tenantHeadVenn serves venn's stack over a head window of
// benchWindowHead blocks behind gate (nil: none, auth off).
func tenantHeadVenn(b *testing.B, gate *edge.Edge) string {
	var blocks []*evm.Block
	for n := uint64(1); n <= benchWindowHead; n++ {
		raw := fmt.Sprintf(`{"number":"0x%x","hash":%q,"parentHash":%q,"timestamp":"0x1","transactions":[],"uncles":[]}`,
			n, benchWindowHash(n), benchWindowHash(n-1))
		blk, err := evm.ParseBlock([]byte(raw), []byte(`[]`))
		if err != nil {
			b.Fatal(err)
		}
		blocks = append(blocks, blk)
	}
	w := headstore.NewWindow(benchWindowHead)
	if err := w.Reset(&headstore.Snapshot{Gen: "g", Seq: 1, Blocks: blocks}); err != nil {
		b.Fatal(err)
	}
	w.SetLive(true)
	opts := jrpc.Options{Registerer: prometheus.NewRegistry(), MethodLabel: evm.MethodLabel}
	if gate != nil {
		opts.Gate = gate
	}
	srv := jrpc.NewServer(opts)
	srv.Handle("eth", router.New(router.Config{Chain: "eth", ChainID: 1, MaxLag: 4}, w, windowRemotes{}, nil))
	var h http.Handler = srv.Handler()
	if gate != nil {
		h = gate.Wrap(h)
	}
	venn := httptest.NewServer(h)
	b.Cleanup(venn.Close)
	return venn.URL + "/eth"
}
