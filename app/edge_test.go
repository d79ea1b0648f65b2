package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/keyspace"
)

// testRedisURL is the Redis every package's tests share.
const testRedisURL = "redis://127.0.0.1:6379/0"

// startApp starts venn on cfg and returns its servers; it is stopped when
// the test ends.
func startApp(t *testing.T, cfg *Config) *servers {
	t.Helper()
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(io.Discard), fx.Populate(&s))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return s
}

// randomName is a lower-case name no other test uses.
func randomName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// certs is a CA and certificates it signed, in PEM files under a temp dir.
type certs struct {
	dir                 string
	caFile              string
	serverCert          string
	serverKey           string
	pool                *x509.CertPool  // trusts the CA
	client, otherClient tls.Certificate // signed by the CA, and by another CA
}

// newCerts makes a CA, a server certificate for 127.0.0.1 and two client
// certificates: one from the CA, one from a CA venn does not know.
func newCerts(t *testing.T) *certs {
	t.Helper()
	c := &certs{dir: t.TempDir()}
	caCert, caKey := newCA(t, "venn test CA")
	otherCA, otherKey := newCA(t, "someone else's CA")
	c.caFile = writePEM(t, c.dir, "ca.pem", "CERTIFICATE", caCert.Raw)
	c.pool = x509.NewCertPool()
	c.pool.AddCert(caCert)

	srv, srvKey := newLeaf(t, caCert, caKey, "venn", x509.ExtKeyUsageServerAuth)
	c.serverCert = writePEM(t, c.dir, "cert.pem", "CERTIFICATE", srv.Raw)
	der, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	c.serverKey = writePEM(t, c.dir, "key.pem", "EC PRIVATE KEY", der)

	cl, clKey := newLeaf(t, caCert, caKey, "client", x509.ExtKeyUsageClientAuth)
	c.client = tls.Certificate{Certificate: [][]byte{cl.Raw}, PrivateKey: clKey}
	ocl, oclKey := newLeaf(t, otherCA, otherKey, "stranger", x509.ExtKeyUsageClientAuth)
	c.otherClient = tls.Certificate{Certificate: [][]byte{ocl.Raw}, PrivateKey: oclKey}
	return c
}

func newCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func newLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(math.MaxInt64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tlsConfigYAML is a config serving chain "test" (answered locally:
// eth_chainId needs no remote) on listen with the given tls section.
func tlsConfigYAML(t *testing.T, tlsSection string) *Config {
	t.Helper()
	return mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: ""
shutdown_timeout: 5s
tls: `+tlsSection+`
chains:
  - name: test
    chain_id: 1337
    remotes:
      - {name: unreachable, url: "http://`+testkit.ClosedAddr(t)+`", timeout: 500ms}
`)
}

const chainIDCall = `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`

func TestTLS(t *testing.T) {
	c := newCerts(t)
	plain := startApp(t, tlsConfigYAML(t, `{cert_file: `+c.serverCert+`, key_file: `+c.serverKey+`}`))
	mutual := startApp(t, tlsConfigYAML(t, `{cert_file: `+c.serverCert+`, key_file: `+c.serverKey+`, client_ca_file: `+c.caFile+`}`))

	tests := []struct {
		name    string
		s       *servers
		client  *tls.Certificate
		scheme  string
		wantErr bool
	}{
		{name: "tls", s: plain, scheme: "https"},
		{name: "plain http to a tls listener", s: plain, scheme: "http", wantErr: true},
		{name: "mtls with a client certificate", s: mutual, client: &c.client, scheme: "https"},
		{name: "mtls without a client certificate", s: mutual, scheme: "https", wantErr: true},
		{name: "mtls with a stranger's certificate", s: mutual, client: &c.otherClient, scheme: "https", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
			if tt.client != nil {
				tc.Certificates = []tls.Certificate{*tt.client}
			}
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
			defer client.CloseIdleConnections()
			url := tt.scheme + "://" + tt.s.rpc.bound.String() + "/test"
			resp, err := client.Post(url, "application/json", strings.NewReader(chainIDCall))
			if err == nil {
				defer resp.Body.Close()
			}
			if tt.wantErr {
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"0x539"`) {
						t.Fatalf("served: %s", body)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("post: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if want := `{"jsonrpc":"2.0","id":1,"result":"0x539"}`; string(body) != want {
				t.Errorf("answer = %s, want %s", body, want)
			}
			if resp.TLS == nil || resp.Proto != "HTTP/1.1" {
				t.Errorf("TLS = %v, proto %s; want TLS over HTTP/1.1", resp.TLS != nil, resp.Proto)
			}

			// WebSocket upgrades work over the same TLS listener.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ws, _, err := websocket.Dial(ctx, "wss://"+tt.s.rpc.bound.String()+"/test", &websocket.DialOptions{HTTPClient: client})
			if err != nil {
				t.Fatalf("wss dial: %v", err)
			}
			defer ws.CloseNow()
			if err := ws.Write(ctx, websocket.MessageText, []byte(chainIDCall)); err != nil {
				t.Fatal(err)
			}
			if _, got, err := ws.Read(ctx); err != nil || !strings.Contains(string(got), `"0x539"`) {
				t.Errorf("wss answer = %s, %v", got, err)
			}
			_ = ws.Close(websocket.StatusNormalClosure, "")
		})
	}
}

func TestTLSBadFilesFailStart(t *testing.T) {
	c := newCerts(t)
	cfg := tlsConfigYAML(t, `{cert_file: `+c.serverCert+`, key_file: `+filepath.Join(c.dir, "missing.pem")+`}`)
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(io.Discard))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := app.Start(ctx)
	if err == nil {
		app.RequireStop()
		t.Fatal("started without its key file")
	}
	if !strings.Contains(err.Error(), "rpc server: tls: load cert_file and key_file") {
		t.Errorf("err = %v", err)
	}
}

// TestRateLimitsAcrossReplicas: two replicas sharing Redis in front of one
// node; a key limited to rps calls a second with a burst gets, across
// both, at most burst + rps × the time the calls took, and the rest get
// -32055 with HTTP 429. Without the shared state each replica would admit
// its own burst.
func TestRateLimitsAcrossReplicas(t *testing.T) {
	const (
		rps   = 2
		burst = 10
		calls = 60
	)
	node := fakenode.Start(t, fakenode.Options{})
	chain := randomName("rl")
	keyName := randomName("k")
	secret := randomName("secret-")
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, _ := rdb.Keys(ctx, "venn:{"+chain+"}:*").Result()
		keys = append(keys, keyspace.For(chain).Lease, keyspace.For(chain).Epoch, keyspace.RateLimitKey(edge.DefaultRateLimitPrefix, "key:"+keyName))
		_ = rdb.Del(ctx, keys...).Err()
		_ = rdb.Close()
	})
	var replicas []*servers
	for i := range 2 {
		replicas = append(replicas, startApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
redis: {url: `+testRedisURL+`, replica_id: `+chain+`-`+string(rune('a'+i))+`}
# Generous for a loaded test machine: a decision that times out fails open.
rate_limits: {redis_timeout: 5s}
auth:
  keys:
    - {name: `+keyName+`, key: `+secret+`, rate_limit: {rps: `+strconv.Itoa(rps)+`, burst: `+strconv.Itoa(burst)+`}}
chains:
  - name: `+chain+`
    chain_id: 1337
    remotes:
      - {name: node, url: "`+node.URL()+`"}
`)))
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for _, r := range replicas {
		testkit.WaitFor(t, 10*time.Second, "replica ready", func() bool {
			code, _ := get(t, client, "http://"+r.metrics.bound.String()+"/readyz")
			return code == http.StatusOK
		})
	}

	type result struct {
		replica, status int
		retryAfter      string
		code            int
	}
	results := make([]result, calls)
	var wg sync.WaitGroup
	start := time.Now()
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				r := i % 2
				req, _ := http.NewRequest("POST", "http://"+replicas[r].rpc.bound.String()+"/"+chain,
					strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","0x1"]}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Api-Key", secret)
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("call %d: %v", i, err)
					continue
				}
				var w wireResponse
				_ = json.NewDecoder(resp.Body).Decode(&w)
				resp.Body.Close()
				res := result{replica: r, status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
				if w.Error != nil {
					res.code = w.Error.Code
				}
				results[i] = res
			}
		})
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(start)

	ok, refusedBy := 0, [2]int{}
	for i, r := range results {
		switch {
		case r.status == http.StatusOK && r.code == 0:
			ok++
		case r.status == http.StatusTooManyRequests && r.code == jrpc.CodeRateLimited && r.retryAfter != "":
			refusedBy[r.replica]++
		default:
			t.Errorf("call %d = %+v, want 200 or 429 with -32055 and Retry-After", i, r)
		}
	}
	limit := burst + int(math.Ceil(rps*took.Seconds()))
	t.Logf("%d of %d served in %v across two replicas (limit %d), refused %v", ok, calls, took, limit, refusedBy)
	if ok > limit {
		t.Errorf("served %d, more than burst + rps × %v = %d", ok, took, limit)
	}
	if ok < burst {
		t.Errorf("served %d, fewer than the burst %d", ok, burst)
	}
	if refusedBy[0] == 0 || refusedBy[1] == 0 {
		t.Errorf("refusals per replica = %v: each replica must see the other's calls", refusedBy)
	}

	// Without the key: 401, before any limit.
	resp, err := client.Post("http://"+replicas[0].rpc.bound.String()+"/"+chain, "application/json", strings.NewReader(chainIDCall))
	if err != nil {
		t.Fatal(err)
	}
	var w wireResponse
	_ = json.NewDecoder(resp.Body).Decode(&w)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || w.Error == nil || w.Error.Code != jrpc.CodeUnauthorized {
		t.Errorf("call without a key = %d %+v, want 401 and -32056", resp.StatusCode, w)
	}
}

// TestRateLimitsRedisDown: with redis.url unreachable, rate-limited calls
// are served (on_redis_error: open, the default) or refused with HTTP 503
// and -32055 (closed).
func TestRateLimitsRedisDown(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		wantStatus int
		wantCode   int
	}{
		{name: "fail open", mode: "open", wantStatus: http.StatusOK},
		{name: "fail closed", mode: "closed", wantStatus: http.StatusServiceUnavailable, wantCode: jrpc.CodeRateLimited},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
redis: {url: "redis://`+testkit.ClosedAddr(t)+`/0"}
rate_limits: {ip: {rps: 1, burst: 1}, on_redis_error: `+tt.mode+`}
chains:
  - name: test
    chain_id: 1337
    remotes:
      - {name: unreachable, url: "http://`+testkit.ClosedAddr(t)+`", timeout: 500ms}
`))
			client := &http.Client{Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			for i := range 3 {
				resp, err := client.Post("http://"+s.rpc.bound.String()+"/test", "application/json", strings.NewReader(chainIDCall))
				if err != nil {
					t.Fatal(err)
				}
				var w wireResponse
				_ = json.NewDecoder(resp.Body).Decode(&w)
				resp.Body.Close()
				code := 0
				if w.Error != nil {
					code = w.Error.Code
				}
				if resp.StatusCode != tt.wantStatus || code != tt.wantCode {
					t.Errorf("call %d = %d %+v, want %d and code %d", i, resp.StatusCode, w, tt.wantStatus, tt.wantCode)
				}
			}
			_, metrics := get(t, client, "http://"+s.metrics.bound.String()+"/metrics")
			if !strings.Contains(metrics, "venn_ratelimit_redis_errors_total 3") {
				t.Errorf("metrics lack venn_ratelimit_redis_errors_total 3")
			}
		})
	}
}
