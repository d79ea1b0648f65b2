package edge

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/venn-gateway/venn/jrpc"
)

// The call and answer of jrpc's BenchmarkServeHTTP/single.
var benchResult = json.RawMessage(`{"number":"0x1b4","hash":"0x` + strings.Repeat("ab", 32) +
	`","transactions":[` + strings.Repeat(`"0x`+strings.Repeat("cd", 32)+`",`, 15) + `"0x00"]}`)

const benchCall = `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1b4",false]}`

// BenchmarkServeHTTPEdge is jrpc's BenchmarkServeHTTP/single with the
// edge on: a key checked, and key and address limits in memory (never
// reached).
func BenchmarkServeHTTPEdge(b *testing.B) {
	e := New(Config{
		Auth:       AuthConfig{Keys: []APIKey{{Name: "alice", Key: aliceSecret}}},
		RateLimits: RateLimits{IP: Rate{RPS: 1e9, Burst: 1e9}, Key: Rate{RPS: 1e9, Burst: 1e9}},
	}, Options{})
	s := jrpc.NewServer(jrpc.Options{Gate: e})
	s.Handle("eth", jrpc.HandlerFunc(func(context.Context, *jrpc.Request) (json.RawMessage, error) {
		return benchResult, nil
	}))
	h := e.Wrap(s.Handler())
	body := []byte(benchCall)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req := httptest.NewRequest("POST", "/eth", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", aliceSecret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkServeHTTPTenant is BenchmarkServeHTTPEdge's call with no gate
// (off) and with a JWT-authenticated tenant whose calls are priced, spent
// from per-minute and per-month budgets and handed to a usage sink (jwt):
// the edge's own CPU per call, without the network, the router or a
// client, which BenchmarkTenantCost (e2e) adds. The budgets are its
// (a large tenant's, e2e's benchBudget).
func BenchmarkServeHTTPTenant(b *testing.B) {
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
	e := New(Config{
		Auth:    AuthConfig{JWT: JWTConfig{Keys: []string{file}, Algorithms: []string{"ES256"}, Audience: "venn"}},
		Tenants: []Tenant{{Name: "team-a", Credits: Budget{PerMinute: 10_000_000, PerMonth: 10_000_000_000}}},
	}, Options{Usage: discardUsage{}})
	handler := jrpc.HandlerFunc(func(context.Context, *jrpc.Request) (json.RawMessage, error) { return benchResult, nil })
	for _, c := range []struct {
		name string
		gate *Edge
	}{{"off", nil}, {"jwt", e}} {
		b.Run(c.name, func(b *testing.B) {
			opts := jrpc.Options{}
			if c.gate != nil {
				opts.Gate = c.gate
			}
			s := jrpc.NewServer(opts)
			s.Handle("eth", handler)
			h := s.Handler()
			if c.gate != nil {
				h = c.gate.Wrap(h)
			}
			body := []byte(benchCall)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/eth", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

type discardUsage struct{}

func (discardUsage) Series(string, string, string) func(time.Time, int64, int64, int64, int64) {
	return func(time.Time, int64, int64, int64, int64) {}
}
