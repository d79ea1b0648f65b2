package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/keyspace"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testRedis connects to the shared test Redis and returns a key prefix no
// other test uses; keys under it are deleted at cleanup.
func testRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	prefix := func(token string) string {
		return "venn-test:" + strings.ReplaceAll(t.Name(), "/", "_") + ":" + token + ":"
	}
	rdb, token := testkit.Redis(t, func(token string) string { return prefix(token) + "*" })
	return rdb, prefix(token)
}

// TestLimiters runs the same GCRA steps against MemoryLimiter and
// RedisLimiter, both on a clock the test moves.
func TestLimiters(t *testing.T) {
	fast := Rate{RPS: 10, Burst: 5} // 100ms a call
	slow := Rate{RPS: 1, Burst: 2}
	type step struct {
		advance time.Duration
		n       int
		buckets []Bucket
		want    Verdict
	}
	key := Bucket{ID: "key:a", Rate: fast}
	ip := Bucket{ID: "ip:a", Rate: slow}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "burst, then one per interval", steps: []step{
			{n: 5, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{Refused: 0, RetryAfter: 100 * time.Millisecond}},
			{advance: 60 * time.Millisecond, n: 1, buckets: []Bucket{key}, want: Verdict{Refused: 0, RetryAfter: 40 * time.Millisecond}},
			{advance: 40 * time.Millisecond, n: 1, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{Refused: 0, RetryAfter: 100 * time.Millisecond}},
		}},
		{name: "calls one at a time", steps: []step{
			{n: 1, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{Refused: 0, RetryAfter: 100 * time.Millisecond}},
		}},
		{name: "a quiet spell refills the burst, no more", steps: []step{
			{n: 5, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{advance: time.Hour, n: 5, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{Refused: 0, RetryAfter: 100 * time.Millisecond}},
		}},
		{name: "a refused batch takes nothing", steps: []step{
			{n: 3, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 3, buckets: []Bucket{key}, want: Verdict{Refused: 0, RetryAfter: 100 * time.Millisecond}},
			{n: 2, buckets: []Bucket{key}, want: Verdict{OK: true}},
		}},
		{name: "more than the burst never fits", steps: []step{
			{n: 6, buckets: []Bucket{key}, want: Verdict{Refused: 0, RetryAfter: Never}},
			{n: 5, buckets: []Bucket{key}, want: Verdict{OK: true}},
		}},
		{name: "two buckets: all or none", steps: []step{
			{n: 2, buckets: []Bucket{key, ip}, want: Verdict{OK: true}},
			// The address is spent; the key is not charged for the refusal.
			{n: 1, buckets: []Bucket{key, ip}, want: Verdict{Refused: 1, RetryAfter: time.Second}},
			{n: 3, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key}, want: Verdict{Refused: 0, RetryAfter: 100 * time.Millisecond}},
		}},
		{name: "the longest wait is the answer", steps: []step{
			{n: 2, buckets: []Bucket{key, ip}, want: Verdict{OK: true}},
			{n: 3, buckets: []Bucket{key}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{key, ip}, want: Verdict{Refused: 1, RetryAfter: time.Second}},
		}},
		{name: "fractional rate", steps: []step{
			{n: 1, buckets: []Bucket{{ID: "key:half", Rate: Rate{RPS: 0.5}}}, want: Verdict{OK: true}},
			{n: 1, buckets: []Bucket{{ID: "key:half", Rate: Rate{RPS: 0.5}}}, want: Verdict{Refused: 0, RetryAfter: 2 * time.Second}},
		}},
	}
	limiters := []struct {
		name string
		new  func(t *testing.T, clock *fakeClock) Limiter
	}{
		{name: "memory", new: func(_ *testing.T, clock *fakeClock) Limiter { return NewMemoryLimiter(clock.Now) }},
		{name: "redis", new: func(t *testing.T, clock *fakeClock) Limiter {
			rdb, prefix := testRedis(t)
			return NewRedisLimiter(rdb, RedisLimiterOptions{Prefix: prefix, Clock: clock.Now})
		}},
	}
	for _, lim := range limiters {
		for _, tt := range tests {
			t.Run(lim.name+"/"+tt.name, func(t *testing.T) {
				clock := newFakeClock()
				l := lim.new(t, clock)
				for i, st := range tt.steps {
					clock.Add(st.advance)
					got, err := l.Take(context.Background(), st.n, st.buckets)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if got != st.want {
						t.Errorf("step %d: Take(%d) = %+v, want %+v", i, st.n, got, st.want)
					}
				}
			})
		}
	}
}

// TestRedisLimiterOwnClock: without a Clock the script times buckets by
// Redis's TIME.
func TestRedisLimiterOwnClock(t *testing.T) {
	rdb, prefix := testRedis(t)
	l := NewRedisLimiter(rdb, RedisLimiterOptions{Prefix: prefix})
	b := []Bucket{{ID: "key:x", Rate: Rate{RPS: 1, Burst: 3}}}
	v, err := l.Take(context.Background(), 3, b)
	if err != nil || !v.OK {
		t.Fatalf("first burst = %+v, %v", v, err)
	}
	v, err = l.Take(context.Background(), 1, b)
	if err != nil || v.OK || v.RetryAfter <= 0 || v.RetryAfter > time.Second {
		t.Fatalf("over the burst = %+v, %v; want a wait within a second", v, err)
	}
	ttl, err := rdb.PTTL(context.Background(), keyspace.RateLimitKey(prefix, "key:x")).Result()
	if err != nil || ttl <= 0 || ttl > 3*time.Second+time.Millisecond {
		t.Errorf("bucket key TTL = %v, %v; want it gone once the bucket is full again (3s)", ttl, err)
	}
}

// limitedServer is a test server with the edge c, whose rate-limit state
// is in memory on a clock the test moves unless limiter is set.
func limitedServer(t *testing.T, c Config, limiter Limiter, reg *prometheus.Registry) (*testServer, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	if limiter == nil {
		limiter = NewMemoryLimiter(clock.Now)
	}
	opts := Options{Limiter: limiter}
	if reg != nil {
		opts.Registerer = reg // not a typed nil
	}
	return newTestServer(t, c, opts, echoHandler()), clock
}

func TestRateLimitPerKey(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, clock := limitedServer(t, Config{
		Auth: AuthConfig{Keys: []APIKey{
			{Name: "alice", Key: aliceSecret},
			{Name: "bob", Key: bobSecret, RateLimit: Rate{RPS: 100, Burst: 100}},
		}},
		RateLimits: RateLimits{Key: Rate{RPS: 2, Burst: 3}},
	}, nil, reg)
	as := func(secret, body string) (int, http.Header, string) {
		return do(t, s, httpCall{header: map[string]string{"X-Api-Key": secret}, body: body})
	}
	for i := range 3 {
		if status, _, body := as(aliceSecret, callOf("test_echo")); status != 200 {
			t.Fatalf("call %d within the burst = %d %s", i, status, body)
		}
	}
	status, h, body := as(aliceSecret, `{"jsonrpc":"2.0","id":"x","method":"test_echo"}`)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "1" {
		t.Errorf("over the limit = %d, Retry-After %q; want 429, 1", status, h.Get("Retry-After"))
	}
	if want := `{"jsonrpc":"2.0","id":"x","error":{"code":-32055,"message":"rate limited","data":{"retry_after_ms":500}}}`; body != want {
		t.Errorf("over the limit = %s, want %s", body, want)
	}
	// Another key has its own bucket (and its own rate).
	if status, _, _ := as(bobSecret, callOf("test_echo")); status != 200 {
		t.Errorf("bob = %d, want 200", status)
	}

	// A batch costs one per call, all or none, each answered with its id.
	clock.Add(time.Second) // two calls back
	status, _, body = as(aliceSecret, `[{"jsonrpc":"2.0","id":1,"method":"test_echo"},{"jsonrpc":"2.0","id":2,"method":"test_echo"},{"jsonrpc":"2.0","method":"update"}]`)
	if status != http.StatusTooManyRequests {
		t.Errorf("batch of 3 with 2 left = %d %s, want 429", status, body)
	}
	var answers []struct {
		ID    json.RawMessage
		Error *jrpc.Error
	}
	if err := json.Unmarshal([]byte(body), &answers); err != nil || len(answers) != 2 {
		t.Fatalf("batch answer %s: want two answers (%v)", body, err)
	}
	for i, a := range answers {
		if string(a.ID) != strconv.Itoa(i+1) || a.Error == nil || a.Error.Code != jrpc.CodeRateLimited {
			t.Errorf("answer %d = %s %+v, want id %d and -32055", i, a.ID, a.Error, i+1)
		}
	}
	if status, _, body := as(aliceSecret, `[{"jsonrpc":"2.0","id":1,"method":"test_echo"},{"jsonrpc":"2.0","id":2,"method":"test_echo"}]`); status != 200 {
		t.Errorf("batch of 2 with 2 left = %d %s", status, body)
	}
	clock.Add(time.Hour)
	status, h, body = as(aliceSecret, "["+strings.Repeat(callOf("test_echo")+",", 3)+callOf("test_echo")+"]")
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "" || !strings.Contains(body, "exceed the limit's burst (3)") {
		t.Errorf("batch over the burst = %d, Retry-After %q, %s; want 429 without Retry-After", status, h.Get("Retry-After"), body)
	}

	if got := counterValue(t, reg, "venn_ratelimit_rejections_total", map[string]string{"chain": "test", "scope": "key"}); got != 3 {
		t.Errorf("key rejections = %v, want 3", got)
	}
	if got := counterValue(t, reg, "venn_requests_total", map[string]string{"chain": "test", "method": "other", "outcome": "limited"}); got != 8 {
		t.Errorf("limited calls = %v, want 8 (1, then 3 with the notification, then 4)", got)
	}
}

// TakeOne takes one call from the same buckets a JSON-RPC call takes
// from, and refuses it as that call is refused; Admitted takes none.
func TestTakeOne(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _ := limitedServer(t, Config{
		Auth: AuthConfig{Keys: []APIKey{
			{Name: "alice", Key: aliceSecret, RateLimit: Rate{RPS: 0.001, Burst: 2}},
			{Name: "bob", Key: bobSecret},
		}},
	}, nil, reg)
	a := jrpc.Admission{Chain: testChain, Transport: "grpc"}
	as := func(secret string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/"+testChain, nil)
		if secret != "" {
			r.Header.Set(DefaultKeyHeader, secret)
		}
		return r
	}
	for range 5 {
		if r := s.edge.Admitted(as(aliceSecret), a); r != nil {
			t.Fatalf("Admitted = %+v", r.Err)
		}
	}
	if r := s.edge.TakeOne(as(aliceSecret), a); r != nil {
		t.Fatalf("the first of a burst of 2 = %+v", r.Err)
	}
	if status, _, body := do(t, s, httpCall{header: map[string]string{"X-Api-Key": aliceSecret}, body: callOf("test_echo")}); status != 200 {
		t.Fatalf("a JSON-RPC call, the second = %d %s", status, body)
	}
	r := s.edge.TakeOne(as(aliceSecret), a)
	if r == nil || r.Status != http.StatusTooManyRequests || r.Err.Code != jrpc.CodeRateLimited || r.Err.Message != "rate limited" {
		t.Fatalf("the third = %+v, want 429 -32055 rate limited", r)
	}
	if status, _, body := do(t, s, httpCall{header: map[string]string{"X-Api-Key": aliceSecret}, body: callOf("test_echo")}); status != http.StatusTooManyRequests {
		t.Errorf("a JSON-RPC call after = %d %s, want 429", status, body)
	}
	for i := range 10 {
		if r := s.edge.TakeOne(as(bobSecret), a); r != nil {
			t.Fatalf("bob, unlimited, take %d = %+v", i, r.Err)
		}
	}
	if r := s.edge.TakeOne(as(""), a); r == nil || r.Err.Code != jrpc.CodeUnauthorized {
		t.Errorf("no key = %+v, want -32056", r)
	}
	if got := counterValue(t, reg, "venn_ratelimit_rejections_total", map[string]string{"chain": testChain, "scope": "key"}); got != 2 {
		t.Errorf("key rejections = %v, want 2", got)
	}
}

func TestRateLimitPerIP(t *testing.T) {
	reg := prometheus.NewRegistry()
	tests := []struct {
		name    string
		trusted []string
		// Addresses the calls claim in X-Forwarded-For, in order; the
		// burst is 2 per address.
		give []string
		want []int
	}{
		{name: "trusted proxy: limited per forwarded address", trusted: []string{"127.0.0.0/8"},
			give: []string{"198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.1", "198.51.100.2", "198.51.100.2"},
			want: []int{200, 200, 200, 429, 200, 429}},
		{name: "untrusted peer: X-Forwarded-For ignored",
			give: []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"},
			want: []int{200, 200, 429}},
		{name: "trusted proxy for another network", trusted: []string{"10.0.0.0/8"},
			give: []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"},
			want: []int{200, 200, 429}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := limitedServer(t, Config{RateLimits: RateLimits{IP: Rate{RPS: 1, Burst: 2}}, TrustedProxies: tt.trusted}, nil, reg)
			for i, addr := range tt.give {
				status, _, body := do(t, s, httpCall{header: map[string]string{"X-Forwarded-For": addr}, body: callOf("test_echo")})
				if status != tt.want[i] {
					t.Errorf("call %d from %s = %d %s, want %d", i, addr, status, body, tt.want[i])
				}
			}
		})
	}
}

// TestRateLimitKeyAndIP: both limits apply to a keyed call, except for a
// key exempt from the per-address one.
func TestRateLimitKeyAndIP(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _ := limitedServer(t, Config{
		Auth: AuthConfig{Keys: []APIKey{
			{Name: "alice", Key: aliceSecret, RateLimit: Rate{RPS: 100, Burst: 100}},
			{Name: "backend", Key: bobSecret, RateLimit: Rate{RPS: 100, Burst: 100}, IPExempt: true},
		}},
		RateLimits: RateLimits{IP: Rate{RPS: 1, Burst: 2}},
	}, nil, reg)
	var got []int
	for range 3 {
		status, _, _ := do(t, s, httpCall{header: map[string]string{"X-Api-Key": aliceSecret}, body: callOf("test_echo")})
		got = append(got, status)
	}
	for range 3 {
		status, _, _ := do(t, s, httpCall{header: map[string]string{"X-Api-Key": bobSecret}, body: callOf("test_echo")})
		got = append(got, status)
	}
	if want := []int{200, 200, 429, 200, 200, 200}; !equalInts(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if got := counterValue(t, reg, "venn_ratelimit_rejections_total", map[string]string{"chain": "test", "scope": "ip"}); got != 1 {
		t.Errorf("ip rejections = %v, want 1", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRateLimitWS(t *testing.T) {
	s, _ := limitedServer(t, Config{RateLimits: RateLimits{IP: Rate{RPS: 1, Burst: 2}}}, nil, nil)
	c := s.dial(t)
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":[]}`,
		`{"jsonrpc":"2.0","id":2,"result":[]}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32055,"message":"rate limited","data":{"retry_after_ms":1000}}}`,
	}
	for i, w := range want {
		testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"test_echo","params":[]}`)
		if got := testkit.WSRead(t, c); got != w {
			t.Errorf("message %d = %s, want %s", i+1, got, w)
		}
	}
}

// TestRateLimitSharedByServers: two servers on one Redis share a key's
// bucket, so together they admit its burst once, not once each.
func TestRateLimitSharedByServers(t *testing.T) {
	rdb, prefix := testRedis(t)
	clock := newFakeClock()
	var servers []*testServer
	for range 2 {
		s, _ := limitedServer(t, Config{
			Auth: AuthConfig{Keys: []APIKey{{Name: "alice", Key: aliceSecret, RateLimit: Rate{RPS: 1, Burst: 4}}}},
		}, NewRedisLimiter(rdb, RedisLimiterOptions{Prefix: prefix, Clock: clock.Now}), nil)
		servers = append(servers, s)
	}
	ok := 0
	for i := range 10 {
		status, _, _ := do(t, servers[i%2], httpCall{header: map[string]string{"X-Api-Key": aliceSecret}, body: callOf("test_echo")})
		if status == 200 {
			ok++
		}
	}
	if ok != 4 {
		t.Errorf("served %d of 10 across two servers, want the burst: 4", ok)
	}
}

// TestRateLimitRedisDown: with Redis unreachable, calls are served (fail
// open, the default) or refused with HTTP 503 (fail closed); either way it
// is counted, and logged at most once per period.
func TestRateLimitRedisDown(t *testing.T) {
	tests := []struct {
		name       string
		failClosed bool
		wantStatus int
		wantBody   string
	}{
		{name: "fail open", wantStatus: 200, wantBody: `{"jsonrpc":"2.0","id":1,"result":[]}`},
		{name: "fail closed", failClosed: true, wantStatus: 503,
			wantBody: `{"jsonrpc":"2.0","id":1,"error":{"code":-32055,"message":"rate limit unavailable; retry shortly"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: testkit.ClosedAddr(t), MaxRetries: -1})
			defer rdb.Close()
			reg := prometheus.NewRegistry()
			var logs testkit.Buffer
			c := Config{RateLimits: RateLimits{IP: Rate{RPS: 1, Burst: 1}, OnRedisError: "open"}}
			if tt.failClosed {
				c.RateLimits.OnRedisError = "closed"
			}
			s := newTestServer(t, c, Options{
				Registerer: reg,
				Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
				Limiter:    NewRedisLimiter(rdb, RedisLimiterOptions{Prefix: "venn-test:down:"}),
			}, echoHandler())
			for i := range 3 {
				status, h, body := do(t, s, httpCall{body: callOf("test_echo")})
				if status != tt.wantStatus || body != tt.wantBody {
					t.Errorf("call %d = %d %s, want %d %s", i, status, body, tt.wantStatus, tt.wantBody)
				}
				if tt.failClosed && h.Get("Retry-After") != "1" {
					t.Errorf("call %d: Retry-After = %q, want 1", i, h.Get("Retry-After"))
				}
			}
			if got := counterValue(t, reg, "venn_ratelimit_redis_errors_total", nil); got != 3 {
				t.Errorf("venn_ratelimit_redis_errors_total = %v, want 3", got)
			}
			if n := strings.Count(logs.String(), "rate limiter unavailable"); n != 1 {
				t.Errorf("logged %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

// TestRedisLimiterPausesOnlyAfterATimeout: a Redis that does not answer
// is not asked again for a while (each call would wait out the timeout);
// one that refuses at once is asked again by the next call, so a failover
// refuses calls no longer than it lasts.
func TestRedisLimiterPausesOnlyAfterATimeout(t *testing.T) {
	stalled, _ := testkit.ServeTCP(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	tests := []struct {
		name      string
		addr      string
		wantPause bool
	}{
		{name: "not answering", addr: stalled, wantPause: true},
		{name: "refusing", addr: testkit.ClosedAddr(t), wantPause: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// As venn builds the limiter's client (app/edge.go).
			rdb := redis.NewClient(&redis.Options{Addr: tt.addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
			defer rdb.Close()
			l := NewRedisLimiter(rdb, RedisLimiterOptions{Prefix: "venn-test:pause:", Timeout: 50 * time.Millisecond})
			b := []Bucket{{ID: "key:x", Rate: Rate{RPS: 1}}}
			if _, err := l.Take(context.Background(), 1, b); err == nil || errors.Is(err, ErrLimiterDown) {
				t.Fatalf("first call: %v, want Redis's failure", err)
			}
			_, err := l.Take(context.Background(), 1, b)
			if paused := errors.Is(err, ErrLimiterDown); err == nil || paused != tt.wantPause {
				t.Errorf("second call: %v, want paused %v", err, tt.wantPause)
			}
		})
	}
}
