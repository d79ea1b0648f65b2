package app

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/keyspace"
)

func TestEdgeConfig(t *testing.T) {
	t.Setenv("VENN_TEST_ALICE_KEY", "alice-0123456789abcdef")
	c := mustParse(t, minimal+`
auth:
  header: Authorization
  keys:
    - name: alice
      key: ${VENN_TEST_ALICE_KEY}
      chains: [ethereum]
      methods: [eth_, net_version]
      enable: ["debug_trace*"]
      rate_limit: {rps: 2.5}
      ip_exempt: true
    - name: bob
      key: bob-0123456789abcdef01
methods: {enable: [debug_getRaw*], block: [eth_sendRawTransaction]}
rate_limits:
  ip: {rps: 10, burst: 50}
  key: {rps: 100}
  on_redis_error: closed
  redis_timeout: 50ms
trusted_proxies: [10.0.0.0/8, 192.0.2.1, "2001:db8::/32"]
cors:
  allowed_origins: ["https://app.example.com", "https://*.example.org"]
  allowed_headers: [X-Client]
  max_age: 1h
tls: {cert_file: /etc/venn/cert.pem, key_file: /etc/venn/key.pem, client_ca_file: /etc/venn/ca.pem}
`)
	want := edge.Config{
		Auth: edge.AuthConfig{Header: "Authorization", Keys: []edge.APIKey{
			{Name: "alice", Key: "alice-0123456789abcdef", Chains: []string{"ethereum"},
				Methods: []string{"eth_", "net_version"}, Enable: []string{"debug_trace*"},
				RateLimit: edge.Rate{RPS: 2.5, Burst: 3}, IPExempt: true},
			{Name: "bob", Key: "bob-0123456789abcdef01"},
		}, Redis: edge.StoredScopes{Refresh: edge.DefaultStoredRefresh, Tag: keyspace.DefaultScopesTag}},
		Methods: edge.MethodPolicy{Enable: []string{"debug_getRaw*"}, Block: []string{"eth_sendRawTransaction"}},
		RateLimits: edge.RateLimits{IP: edge.Rate{RPS: 10, Burst: 50}, Key: edge.Rate{RPS: 100, Burst: 100},
			OnRedisError: "closed", RedisTimeout: 50 * time.Millisecond},
		TrustedProxies: []string{"10.0.0.0/8", "192.0.2.1", "2001:db8::/32"},
		CORS: edge.CORS{AllowedOrigins: []string{"https://app.example.com", "https://*.example.org"},
			AllowedHeaders: []string{"X-Client"}, MaxAge: time.Hour},
		Credits: edge.CreditsConfig{Preset: edge.DefaultCreditsPreset, FlushInterval: edge.DefaultCreditsFlush},
	}
	if !reflect.DeepEqual(c.Edge, want) {
		t.Errorf("edge = %+v\nwant %+v", c.Edge, want)
	}
	if !c.TLS.Enabled() || c.TLS.ClientCAFile != "/etc/venn/ca.pem" {
		t.Errorf("tls = %+v", c.TLS)
	}
	if !c.Edge.RateLimited() {
		t.Error("RateLimited = false")
	}
}

func TestEdgeConfigDefaults(t *testing.T) {
	c := mustParse(t, minimal)
	want := edge.Config{
		Auth: edge.AuthConfig{Header: edge.DefaultKeyHeader,
			Redis: edge.StoredScopes{Refresh: edge.DefaultStoredRefresh, Tag: keyspace.DefaultScopesTag}},
		RateLimits: edge.RateLimits{OnRedisError: "open", RedisTimeout: edge.DefaultRedisLimitTimeout},
		CORS:       edge.CORS{MaxAge: edge.DefaultCORSMaxAge},
		Credits:    edge.CreditsConfig{Preset: edge.DefaultCreditsPreset, FlushInterval: edge.DefaultCreditsFlush},
	}
	if !reflect.DeepEqual(c.Edge, want) {
		t.Errorf("default edge = %+v, want open with the default header", c.Edge)
	}
	if c.TLS.Enabled() || c.Edge.RateLimited() {
		t.Errorf("tls = %+v, rate limited = %v", c.TLS, c.Edge.RateLimited())
	}
}

func TestEdgeConfigValidate(t *testing.T) {
	const secret = "s3cret-0123456789abcdef"
	tests := []struct {
		name string
		give string
		want []string
	}{
		{name: "header", give: "auth: {header: 'X Key'}", want: []string{`auth.header: "X Key" is not a valid header name`}},
		{name: "key fields", give: `
auth:
  keys:
    - {name: "a b", key: short}
    - {name: ok, key: ""}
    - {name: ok, key: "` + secret + `/x"}
    - {name: c, key: "` + secret + `", chains: [ethereum, nope], methods: ["", "eth_ x"], enable: [" "], rate_limit: {rps: -1, burst: -2}}
    - {name: d, key: "` + secret + `"}
`, want: []string{
			`auth.keys[0].name: must match [A-Za-z0-9_.-]+, not "a b"`,
			"auth.keys[0].key: must be at least 16 characters",
			"auth.keys[1].key: required",
			`auth.keys[2].name: "ok" is already used by auth.keys[1]`,
			"auth.keys[2].key: must be printable ASCII without spaces, /, ?, # or % (keys also travel in the path)",
			`auth.keys[3].chains[1]: "nope" is not a configured chain`,
			`auth.keys[3].methods[0]: must be a method name or prefix, not ""`,
			`auth.keys[3].methods[1]: must be a method name or prefix, not "eth_ x"`,
			`auth.keys[3].enable[0]: must be a method name or prefix, not " "`,
			"auth.keys[3].rate_limit.rps: must be a finite number >= 0",
			"auth.keys[3].rate_limit.burst: must be >= 0",
			"auth.keys[4].key: is the same key as auth.keys[3]",
		}},
		{name: "methods", give: "methods: {enable: [''], block: ['a b']}", want: []string{
			`methods.enable[0]: must be a method name or prefix, not ""`,
			`methods.block[0]: must be a method name or prefix, not "a b"`,
		}},
		{name: "rate limits", give: "rate_limits: {ip: {rps: -1}, key: {burst: -1}, on_redis_error: maybe, redis_timeout: -1s}", want: []string{
			// An enum's value is checked as it is decoded, before the rest
			// is validated: its problem comes first, with its line.
			`rate_limits.on_redis_error (line 8): must be open or closed, not "maybe"`,
			"rate_limits.ip.rps: must be a finite number >= 0",
			"rate_limits.key.burst: must be >= 0",
			"rate_limits.redis_timeout: must be positive",
		}},
		{name: "trusted proxies", give: "trusted_proxies: [10.0.0.0/8, 10.0.0.0/33, proxy.example]", want: []string{
			`trusted_proxies[1]: must be an address or a CIDR (10.0.0.0/8), not "10.0.0.0/33"`,
			`trusted_proxies[2]: must be an address or a CIDR (10.0.0.0/8), not "proxy.example"`,
		}},
		{name: "cors", give: "cors: {allowed_origins: ['*', 'https://a.example:8443/', 'null', 'https://a.example/path', 'a.example', 'https://*'], allowed_headers: ['X Y'], max_age: -1s}", want: []string{
			`cors.allowed_origins[2]: must be *, an origin (https://app.example.com) or https://*.example.com, not "null"`,
			`cors.allowed_origins[3]: must be *, an origin (https://app.example.com) or https://*.example.com, not "https://a.example/path"`,
			`cors.allowed_origins[4]: must be *, an origin (https://app.example.com) or https://*.example.com, not "a.example"`,
			`cors.allowed_origins[5]: must be *, an origin (https://app.example.com) or https://*.example.com, not "https://*"`,
			`cors.allowed_headers[0]: "X Y" is not a valid header name`,
			"cors.max_age: must be positive",
		}},
		{name: "tls key without cert", give: "tls: {key_file: k.pem}", want: []string{"tls.cert_file: required with tls.key_file"}},
		{name: "tls cert without key", give: "tls: {cert_file: c.pem}", want: []string{"tls.key_file: required with tls.cert_file"}},
		{name: "tls client ca alone", give: "tls: {client_ca_file: ca.pem}", want: []string{
			"tls.client_ca_file: needs tls.cert_file and tls.key_file: client certificates are checked over TLS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal + tt.give + "\n"))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			got := strings.Split(err.Error(), "\n")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(tt.want, "\n"))
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("a message shows a key: %v", err)
			}
		})
	}
}
