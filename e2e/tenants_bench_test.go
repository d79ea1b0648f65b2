package e2e

import (
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
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
// fake node over HTTP) with auth off and with a JWT-authenticated tenant
// whose calls are priced, spent from per-minute and per-month budgets and
// recorded for usage, interleaved round by round as BenchmarkTracingCost
// does. Three calls: eth_getBalance at latest, passed through to the node;
// eth_chainId, which venn answers itself (the cheapest answer, so the
// largest share for the edge); and eth_getBlockByNumber latest, answered
// from the head window (priced as served from the head). It reports each
// target's process CPU per call (median over rounds) and the median of the
// per-round ratios to off.
func BenchmarkTenantCost(b *testing.B) {
	const segment = 256
	node := fakenode.New(fakenode.Options{ChainID: 1})
	up := httptest.NewServer(node.Handler())
	b.Cleanup(up.Close)
	tok, cfg := tenantEdgeConfig(b)
	off := tenantVenn(b, up.URL, nil)
	rec := usage.NewRecorder(usage.RecorderOptions{Registerer: prometheus.NewRegistry()})
	gate := edge.New(cfg, edge.Options{Usage: rec, Registerer: prometheus.NewRegistry()})
	on := tenantVenn(b, up.URL, gate)
	headOff, headOn := tenantHeadVenn(b, nil), tenantHeadVenn(b, gate)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	type target struct{ name, url, method string }
	targets := []target{
		{"pass-off", off, "eth_getBalance"}, {"pass-jwt", on, "eth_getBalance"},
		{"local-off", off, "eth_chainId"}, {"local-jwt", on, "eth_chainId"},
		{"head-off", headOff, "eth_getBlockByNumber"}, {"head-jwt", headOn, "eth_getBlockByNumber"},
	}
	for _, u := range []string{headOff, headOn} {
		if got := tenantCall(b, client, u, "eth_getBlockByNumber", tok, 0); !bytes.Contains(got, []byte(benchWindowHash(benchWindowHead))) {
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
				tenantHop(b, client, targets[t].url, targets[t].method, tok, id)
			}
			cpu[t] = append(cpu[t], float64(processCPU(b)-c0)/segment)
		}
		round++
	}
	for t, tg := range targets {
		b.ReportMetric(median(cpu[t]), tg.name+"-cpu-ns/call")
	}
	for _, pair := range [][2]int{{0, 1}, {2, 3}, {4, 5}} {
		r := make([]float64, round)
		for i := range round {
			r[i] = cpu[pair[1]][i] / cpu[pair[0]][i]
		}
		b.ReportMetric(median(r), targets[pair[1]].name+"/off")
	}
	if len(rec.Pending()) == 0 {
		b.Fatal("no usage recorded")
	}
}

// tenantEdgeConfig is a tenant behind a JWT (a static ES256 key) with
// budgets too large to reach, and the token.
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
		Tenants: []edge.Tenant{{Name: "team-a", Credits: edge.Budget{PerMinute: 1 << 50, PerMonth: 1 << 60}}},
	}
}

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
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"%s","params":["0x%040x","latest"]}`, i, method, i)
	switch method {
	case "eth_chainId":
		body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_chainId","params":[]}`, i)
	case "eth_getBlockByNumber":
		body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByNumber","params":["latest",false]}`, i)
	}
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
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
