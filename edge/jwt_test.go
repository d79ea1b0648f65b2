package edge

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/venn-gateway/venn/jrpc"
)

// issuer is a JWT issuer a test runs: its keys, served as a JWKS on
// 127.0.0.1, which the test rotates.
type issuer struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]crypto.Signer // by kid
	served  atomic.Int64             // key sets served
	version atomic.Int64             // changes of the key set
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{t: t, keys: map[string]crypto.Signer{}}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.mu.Lock()
		var set jose.JSONWebKeySet
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Use: "sig"})
		}
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
		is.served.Add(1)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) url() string { return is.srv.URL + "/.well-known/jwks.json" }

func (is *issuer) add(kid string, k crypto.Signer) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys[kid] = k
	is.version.Add(1)
}

func (is *issuer) remove(kid string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	delete(is.keys, kid)
	is.version.Add(1)
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ecKey(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// token signs claims with k under method, kid in the header ("" none).
func token(t *testing.T, method jwt.SigningMethod, k any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// goodClaims are valid claims for tenant, an hour long.
func goodClaims(tenant string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"tenant": tenant, "aud": "venn", "iss": "https://issuer.test",
		"exp": now.Add(time.Hour).Unix(), "nbf": now.Add(-time.Minute).Unix(), "sub": "svc-1"}
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// tenantHandler answers test_tenant with the caller's tenant.
func tenantHandler() jrpc.Handler {
	echo := echoHandler()
	return jrpc.HandlerFunc(func(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
		if req.Method == "test_tenant" {
			p, _ := jrpc.PeerFromContext(ctx)
			return json.Marshal(p.Tenant)
		}
		return echo.ServeRPC(ctx, req)
	})
}

func jwtConfig(url string) Config {
	return Config{
		Auth: AuthConfig{JWT: JWTConfig{JWKSURL: url, Algorithms: []string{"RS256", "ES256"},
			Audience: "venn", Issuer: "https://issuer.test"}},
		Tenants: []Tenant{{Name: "team-a"}, {Name: "team-b"}},
	}
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func TestJWT(t *testing.T) {
	is := newIssuer(t)
	rk := rsaKey(t)
	ek := ecKey(t, elliptic.P256())
	is.add("rsa-1", rk)
	is.add("ec-1", ek)
	jwks := NewJWKS(is.url(), JWKSOptions{MinRefresh: time.Hour})
	jwks.Start(context.Background())
	t.Cleanup(jwks.Stop)
	s := newTestServer(t, jwtConfig(is.url()), Options{JWKS: jwks}, tenantHandler())

	other := rsaKey(t)
	p384 := ecKey(t, elliptic.P384())
	good := goodClaims("team-a")
	rsaPub, _ := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	tests := []struct {
		name       string
		give       string
		wantStatus int
		want       string // in the body
	}{
		{name: "RS256 from the JWKS", give: token(t, jwt.SigningMethodRS256, rk, "rsa-1", good), wantStatus: 200, want: `"result":"team-a"`},
		{name: "ES256 from the JWKS", give: token(t, jwt.SigningMethodES256, ek, "ec-1", goodClaims("team-b")), wantStatus: 200, want: `"result":"team-b"`},
		{name: "no kid tries every key", give: token(t, jwt.SigningMethodRS256, rk, "", good), wantStatus: 200, want: `"result":"team-a"`},
		{name: "expired", give: token(t, jwt.SigningMethodRS256, rk, "rsa-1", with(good, "exp", time.Now().Add(-time.Hour).Unix())),
			wantStatus: 401, want: "the token has expired"},
		{name: "no exp", give: token(t, jwt.SigningMethodRS256, rk, "rsa-1", with(good, "exp", nil)), wantStatus: 401, want: "expired"},
		{name: "not yet valid", give: token(t, jwt.SigningMethodRS256, rk, "rsa-1", with(good, "nbf", time.Now().Add(time.Hour).Unix())),
			wantStatus: 401, want: "not valid yet"},
		{name: "wrong audience", give: token(t, jwt.SigningMethodRS256, rk, "rsa-1", with(good, "aud", "someone-else")),
			wantStatus: 401, want: "audience"},
		{name: "wrong issuer", give: token(t, jwt.SigningMethodRS256, rk, "rsa-1", with(good, "iss", "https://evil.test")),
			wantStatus: 401, want: "issuer"},
		{name: "wrong algorithm", give: token(t, jwt.SigningMethodES384, p384, "ec-1", good), wantStatus: 401, want: "algorithm is not allowed"},
		{name: "HS256 with the public key as secret", give: token(t, jwt.SigningMethodHS256, rsaPub, "rsa-1", good),
			wantStatus: 401, want: "algorithm is not allowed"},
		{name: "none", give: token(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", good), wantStatus: 401, want: "algorithm is not allowed"},
		{name: "signed by a key not the issuer's", give: token(t, jwt.SigningMethodRS256, other, "rsa-1", good), wantStatus: 401, want: "signature"},
		{name: "unknown kid", give: token(t, jwt.SigningMethodRS256, other, "rsa-9", good), wantStatus: 401, want: "not among the issuer's keys"},
		{name: "unknown tenant", give: token(t, jwt.SigningMethodRS256, rk, "rsa-1", with(good, "tenant", "team-z")), wantStatus: 401, want: "tenant is not configured"},
		{name: "no tenant", give: token(t, jwt.SigningMethodRS256, rk, "rsa-1", with(good, "tenant", nil)), wantStatus: 401, want: "names no tenant"},
		{name: "garbage", give: "not.a.jwt", wantStatus: 401, want: "not a well-formed JWT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := do(t, s, httpCall{header: bearer(tt.give), body: callOf("test_tenant")})
			if status != tt.wantStatus || !strings.Contains(body, tt.want) {
				t.Errorf("status %d body %s; want %d with %q", status, body, tt.wantStatus, tt.want)
			}
			if len(tt.give) > 20 && strings.Contains(body, tt.give[len(tt.give)-20:]) {
				t.Errorf("the refusal repeats the token: %s", body)
			}
		})
	}
	if status, _, body := do(t, s, httpCall{body: callOf("test_tenant")}); status != 401 || !strings.Contains(body, "bearer token is required") {
		t.Errorf("no token: %d %s", status, body)
	}

	// The WebSocket upgrade carries the token too.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, s.wsURL(), nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("upgrade without a token: err %v", err)
	}
	c, _, err := websocket.Dial(ctx, s.wsURL(), &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + token(t, jwt.SigningMethodES256, ek, "ec-1", goodClaims("team-b"))}}})
	if err != nil {
		t.Fatalf("upgrade with a token: %v", err)
	}
	defer c.CloseNow()
	if got := wsCall(t, c, callOf("test_tenant")); !strings.Contains(got, `"result":"team-b"`) {
		t.Errorf("over WebSocket: %s", got)
	}
}

// wsCall sends msg and reads one answer.
func wsCall(t *testing.T, c *websocket.Conn, msg string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJWKSRotation: a key added to the issuer's set verifies from its
// first token; a key removed stops verifying once the set is refreshed.
func TestJWKSRotation(t *testing.T) {
	is := newIssuer(t)
	k1, k2 := rsaKey(t), ecKey(t, elliptic.P256())
	is.add("k1", k1)
	jwks := NewJWKS(is.url(), JWKSOptions{Refresh: 20 * time.Millisecond, MinRefresh: time.Millisecond})
	jwks.Start(context.Background())
	t.Cleanup(jwks.Stop)
	s := newTestServer(t, jwtConfig(is.url()), Options{JWKS: jwks}, tenantHandler())
	old := token(t, jwt.SigningMethodRS256, k1, "k1", goodClaims("team-a"))
	if status, _, body := do(t, s, httpCall{header: bearer(old), body: callOf("test_tenant")}); status != 200 {
		t.Fatalf("k1 before rotation: %d %s", status, body)
	}

	// Rotation: k2 appears. Its first token is verified (the unknown kid
	// fetches the set), without waiting for the periodic refresh.
	is.add("k2", k2)
	fresh := token(t, jwt.SigningMethodES256, k2, "k2", goodClaims("team-a"))
	if status, _, body := do(t, s, httpCall{header: bearer(fresh), body: callOf("test_tenant")}); status != 200 {
		t.Fatalf("k2's first token: %d %s", status, body)
	}

	// k1 is removed: once a set without it is served and taken, k1's
	// token (verified and cached before) is refused.
	is.remove("k1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, body := do(t, s, httpCall{header: bearer(old), body: callOf("test_tenant")})
		if status == 401 {
			if !strings.Contains(body, "not among the issuer's keys") {
				t.Errorf("k1 after removal: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("k1's token still served 10s after its key was removed (%d sets served)", is.served.Load())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		waitServed(ctx, is, is.served.Load()+1)
		cancel()
	}
	if status, _, body := do(t, s, httpCall{header: bearer(fresh), body: callOf("test_tenant")}); status != 200 {
		t.Errorf("k2 after k1's removal: %d %s", status, body)
	}
}

// waitServed waits until the issuer has served n key sets, or ctx ends.
func waitServed(ctx context.Context, is *issuer, n int64) {
	for is.served.Load() < n && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
}

// TestJWTStaticKeys: a token signed by a key from a PEM file, no JWKS.
func TestJWTStaticKeys(t *testing.T) {
	k := ecKey(t, elliptic.P256())
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwt-public.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	c := jwtConfig("")
	c.Auth.JWT.Keys = []string{file}
	if err := c.WithDefaults().Validate([]string{testChain}); err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, c, Options{}, tenantHandler())
	if status, _, body := do(t, s, httpCall{header: bearer(token(t, jwt.SigningMethodES256, k, "", goodClaims("team-b"))),
		body: callOf("test_tenant")}); status != 200 || !strings.Contains(body, "team-b") {
		t.Errorf("static key: %d %s", status, body)
	}
	if status, _, _ := do(t, s, httpCall{header: bearer(token(t, jwt.SigningMethodES256, ecKey(t, elliptic.P256()), "", goodClaims("team-b"))),
		body: callOf("test_tenant")}); status != 401 {
		t.Errorf("another key: %d", status)
	}
}

func TestJWTConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string
	}{
		{name: "HS256", give: Config{Auth: AuthConfig{JWT: JWTConfig{JWKSURL: "https://i.example/jwks", Algorithms: []string{"HS256"}}},
			Tenants: []Tenant{{Name: "a"}}}, want: "auth.jwt.algorithms[0]"},
		{name: "no tenants", give: Config{Auth: AuthConfig{JWT: JWTConfig{JWKSURL: "https://i.example/jwks"}}}, want: "auth.jwt: needs tenants"},
		{name: "missing key file", give: Config{Auth: AuthConfig{JWT: JWTConfig{Keys: []string{"/nonexistent.pem"}}},
			Tenants: []Tenant{{Name: "a"}}}, want: "auth.jwt.keys[0]"},
		{name: "bad url", give: Config{Auth: AuthConfig{JWT: JWTConfig{JWKSURL: "ftp://x"}}, Tenants: []Tenant{{Name: "a"}}}, want: "auth.jwt.jwks_url"},
		{name: "audience without keys", give: Config{Auth: AuthConfig{JWT: JWTConfig{Audience: "venn"}}}, want: "auth.jwt.audience"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.WithDefaults().Validate([]string{testChain})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestJWTCachedTokenLookalike: the verified-token cache is keyed by a
// token's last bytes (its signature's end); a token that ends like a cached
// one but says something else is verified, and refused, never served as the
// cached one's tenant. The cached one still passes after it.
func TestJWTCachedTokenLookalike(t *testing.T) {
	is := newIssuer(t)
	ek := ecKey(t, elliptic.P256())
	is.add("ec-1", ek)
	jwks := NewJWKS(is.url(), JWKSOptions{MinRefresh: time.Hour})
	jwks.Start(context.Background())
	t.Cleanup(jwks.Stop)
	s := newTestServer(t, jwtConfig(is.url()), Options{JWKS: jwks}, tenantHandler())

	good := token(t, jwt.SigningMethodES256, ek, "ec-1", goodClaims("team-a"))
	other := strings.Split(token(t, jwt.SigningMethodES256, ek, "ec-1", goodClaims("team-b")), ".")
	parts := strings.Split(good, ".")
	lookalike := parts[0] + "." + other[1] + "." + parts[2] // team-b's claims, team-a's signature
	tests := []struct {
		name       string
		give       string
		wantStatus int
		want       string
	}{
		{"the token, verified and cached", good, 200, `"result":"team-a"`},
		{"its claims changed, its signature kept", lookalike, 401, "signature"},
		{"the token again, from the cache", good, 200, `"result":"team-a"`},
	}
	for _, tt := range tests {
		status, _, body := do(t, s, httpCall{header: bearer(tt.give), body: callOf("test_tenant")})
		if status != tt.wantStatus || !strings.Contains(body, tt.want) {
			t.Errorf("%s: status %d body %s; want %d with %q", tt.name, status, body, tt.wantStatus, tt.want)
		}
	}
}
