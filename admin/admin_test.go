package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/status"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testToken = "admin-token-0123456789"

// clock is a test's clock the admins read; expiry follows it, not the
// wall.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// replica is one admin over its own pool of the chain's remotes.
type replica struct {
	admin *Admin
	pool  *remotes.Pool
	reg   *prometheus.Registry
	srv   *httptest.Server
}

// startPool starts a pool over nodes (remote i named n<i>) on chain,
// stopped at cleanup, and waits until every remote is in rotation.
func startPool(t *testing.T, chain string, nodes []*fakenode.Node, reg *prometheus.Registry) *remotes.Pool {
	t.Helper()
	rs := make([]remotes.Config, len(nodes))
	for i, n := range nodes {
		rs[i] = remotes.Config{Name: fmt.Sprintf("n%d", i), URL: n.URL(), Timeout: 2 * time.Second}
	}
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: chain, ChainID: 1337, BlockTime: 50 * time.Millisecond}, rs, nil, remotes.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Stop(context.Background()) })
	testkit.WaitFor(t, 5*time.Second, "every remote in rotation", func() bool {
		for _, s := range pool.Status() {
			if !s.InRotation {
				return false
			}
		}
		return true
	})
	return pool
}

// startReplica starts a pool over nodes (remote i named n<i>) on chain and
// an admin over it, on rdb when it is not nil, both stopped at cleanup;
// tweaks change the admin's options first.
func startReplica(t *testing.T, chain, id string, nodes []*fakenode.Node, rdb redis.UniversalClient, clk *clock, tweaks ...func(*Options)) *replica {
	t.Helper()
	reg := prometheus.NewRegistry()
	pool := startPool(t, chain, nodes, reg)
	opts := Options{Config: Config{Tokens: []Token{{Name: "alice", Token: testToken}}, CordonResync: 50 * time.Millisecond,
		Heartbeat: 50 * time.Millisecond},
		Replica: id, Version: "test", Chains: []Chain{{Name: chain, Path: "/" + chain, Pool: pool, Heads: pool.Heads()}},
		Registerer: reg, Now: clk.Now}
	if rdb != nil {
		opts.Redis = rdb
	}
	for _, tw := range tweaks {
		tw(&opts)
	}
	a := New(opts)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return &replica{admin: a, pool: pool, reg: reg, srv: srv}
}

// outBy reports whether pool has remote out of rotation by a manual
// cordon.
func outBy(pool Pool, remote string) bool {
	for _, s := range pool.Status() {
		if s.Name == remote {
			for _, o := range s.Out {
				if o.Code == status.OutCordoned {
					return true
				}
			}
		}
	}
	return false
}

func cordonGauge(r *replica, chain, remote string) float64 {
	n, _ := testutil.GatherAndCount(r.reg, "venn_remote_cordoned")
	if n == 0 {
		return -1
	}
	mfs, _ := r.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "venn_remote_cordoned" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var c, rem string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "chain":
					c = l.GetValue()
				case "remote":
					rem = l.GetValue()
				}
			}
			if c == chain && rem == remote {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestCordonAcrossReplicas: a cordon set through one replica takes the
// remote out on the two others within a second, by message (the resync is
// an hour), and its expiry (on the test's clock) brings it back
// everywhere at the next resync; an uncordon on another replica lifts a
// cordon without expiry.
func TestCordonAcrossReplicas(t *testing.T) {
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:{*" + token + "*}*" })
	chain := "cordon-" + token
	ids := []string{"a-" + token, "b-" + token, "c-" + token}
	t.Cleanup(func() { rdb.HDel(context.Background(), keyspace.Replicas, ids...) })
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100}), fakenode.Start(t, fakenode.Options{Head: 100})}
	clk := &clock{now: time.Now()}
	var rs []*replica
	for _, id := range ids {
		rs = append(rs, startReplica(t, chain, id, nodes, rdb, clk, func(o *Options) { o.Config.CordonResync = time.Hour }))
	}
	waitSubscribed(t, rdb, chain, int64(len(rs)))
	url := rs[0].srv.URL + "/admin/chains/" + chain + "/remotes/n1/"

	code, body := testkit.AdminDo(t, "POST", url+"cordon", testToken, `{"reason":"flaky receipts","for":"10m"}`)
	if code != http.StatusOK || !strings.Contains(body, `"applied": true`) {
		t.Fatalf("cordon = %d %s", code, body)
	}
	start := time.Now()
	for i, r := range rs {
		testkit.WaitFor(t, time.Second-time.Since(start), fmt.Sprintf("n1 cordoned on replica %d", i), func() bool {
			return outBy(r.pool, "n1") && cordonGauge(r, chain, "n1") == 1
		})
	}
	t.Logf("cordon applied on all three replicas %v after the answer", time.Since(start).Round(time.Millisecond))
	st := rs[2].pool.Status()[1]
	if st.Cordon == nil || st.Cordon.By != "alice" || st.Cordon.Reason != "flaky receipts" {
		t.Errorf("cordon on replica c: %+v", st.Cordon)
	}

	clk.add(11 * time.Minute)
	for i, r := range rs {
		r.admin.sync.syncAll(context.Background()) // the resync's tick
		testkit.WaitFor(t, 2*time.Second, fmt.Sprintf("n1 back on replica %d after the expiry", i), func() bool {
			return !outBy(r.pool, "n1") && cordonGauge(r, chain, "n1") == 0
		})
	}

	if code, body := testkit.AdminDo(t, "POST", url+"cordon", testToken, `{}`); code != http.StatusOK {
		t.Fatalf("cordon = %d %s", code, body)
	}
	testkit.WaitFor(t, time.Second, "n1 cordoned on replica c", func() bool { return outBy(rs[2].pool, "n1") })
	other := rs[2].srv.URL + "/admin/chains/" + chain + "/remotes/n1/uncordon"
	if code, body := testkit.AdminDo(t, "POST", other, testToken, ``); code != http.StatusOK || !strings.Contains(body, `"removed": true`) {
		t.Fatalf("uncordon = %d %s", code, body)
	}
	testkit.WaitFor(t, time.Second, "n1 back on replica a", func() bool { return !outBy(rs[0].pool, "n1") })

	testkit.WaitFor(t, 2*time.Second, "every replica listed by b", func() bool {
		code, body := testkit.AdminDo(t, "GET", rs[1].srv.URL+"/admin/replicas", testToken, "")
		for _, id := range ids {
			if code != http.StatusOK || !strings.Contains(body, `"`+id+`"`) {
				return false
			}
		}
		return true
	})
}

// TestCordonSparesTheLastRemote: cordoning every remote of a chain leaves
// the last in rotation, on this replica and on the others, with the
// cordon shown as held back; when another comes back, it applies.
func TestCordonSparesTheLastRemote(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("redis=%v", shared), func(t *testing.T) {
			var rdb redis.UniversalClient
			chain := "last"
			if shared {
				c, token := testkit.Redis(t, func(token string) string { return "venn:{*" + token + "*}*" })
				rdb, chain = c, "last-"+token
			}
			nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100}), fakenode.Start(t, fakenode.Options{Head: 100})}
			r := startReplica(t, chain, "solo", nodes, rdb, &clock{now: time.Now()})
			url := r.srv.URL + "/admin/chains/" + chain + "/remotes/"
			if code, body := testkit.AdminDo(t, "POST", url+"n0/cordon", testToken, `{}`); code != http.StatusOK || !strings.Contains(body, `"applied": true`) {
				t.Fatalf("cordon n0 = %d %s", code, body)
			}
			code, body := testkit.AdminDo(t, "POST", url+"n1/cordon", testToken, `{}`)
			if code != http.StatusOK || !strings.Contains(body, `"applied": false`) || !strings.Contains(body, "last remote") {
				t.Fatalf("cordon n1 = %d %s, want it held back", code, body)
			}
			if outBy(r.pool, "n1") || !r.pool.Ready() {
				t.Fatalf("the last remote was cordoned out: %+v", r.pool.Status())
			}
			if code, _ := testkit.AdminDo(t, "POST", url+"n0/uncordon", testToken, ``); code != http.StatusOK {
				t.Fatal(code)
			}
			testkit.WaitFor(t, time.Second, "n1's held cordon applies once n0 is back", func() bool {
				return outBy(r.pool, "n1") && !outBy(r.pool, "n0")
			})
		})
	}
}

// TestAPIRefusesWithoutToken: every route answers 401 without the token
// or with a wrong one, and each refused action is counted.
func TestAPIRefusesWithoutToken(t *testing.T) {
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100})}
	r := startReplica(t, "auth", "solo", nodes, nil, &clock{now: time.Now()})
	routes := []struct{ method, path string }{
		{"GET", "/admin/status"}, {"GET", "/admin/chains"}, {"GET", "/admin/chains/auth"},
		{"GET", "/admin/replicas"}, {"GET", "/admin/config"},
		{"POST", "/admin/chains/auth/remotes/n0/cordon"}, {"POST", "/admin/chains/auth/remotes/n0/uncordon"},
		{"POST", "/admin/drain"}, {"POST", "/admin/reload"},
		{"GET", "/admin/debug/pprof/"}, {"GET", "/admin/debug/pprof/heap"}, {"GET", "/admin/debug/pprof/profile?seconds=1"},
	}
	for _, rt := range routes {
		for _, tok := range []string{"", "wrong-token-0123456789", testToken + "x"} {
			if code, body := testkit.AdminDo(t, rt.method, r.srv.URL+rt.path, tok, `{}`); code != http.StatusUnauthorized {
				t.Errorf("%s %s with %q = %d %s, want 401", rt.method, rt.path, tok, code, body)
			}
		}
	}
	if n := testutil.ToFloat64(r.admin.m.actions.WithLabelValues(actionCordon, outcomeUnauthorized)); n != 3 {
		t.Errorf("unauthorized cordons counted %v, want 3", n)
	}
	if outBy(r.pool, "n0") {
		t.Error("a refused cordon applied")
	}
	if code, _ := testkit.AdminDo(t, "GET", r.srv.URL+"/admin/status", testToken, ""); code != http.StatusOK {
		t.Errorf("status with the token = %d", code)
	}
	// The runtime's profiles are reads behind the same token.
	if code, body := testkit.AdminDo(t, "GET", r.srv.URL+"/admin/debug/pprof/goroutine?debug=1", testToken, ""); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Errorf("goroutine profile with the token = %d %.200s", code, body)
	}
}

// TestReloadAndDrainHooks: reload and drain call what the app gave, and
// answer 501 without it.
func TestReloadAndDrainHooks(t *testing.T) {
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100})}
	bare := startReplica(t, "hooks", "solo", nodes, nil, &clock{now: time.Now()})
	for _, p := range []string{"/admin/reload", "/admin/drain"} {
		if code, body := testkit.AdminDo(t, "POST", bare.srv.URL+p, testToken, ""); code != http.StatusNotImplemented {
			t.Errorf("%s without a hook = %d %s, want 501", p, code, body)
		}
	}
	var applied atomic.Bool
	r := startReplica(t, "hooks", "solo", nodes, nil, &clock{now: time.Now()}, func(o *Options) {
		o.Reload = func(context.Context) (any, bool) {
			return map[string]any{"problems": []string{"chains[0].name: required"}}, applied.Load()
		}
		o.Drain = func(context.Context) DrainReport { return DrainReport{Draining: true, Released: []string{"hooks"}} }
	})
	if code, body := testkit.AdminDo(t, "POST", r.srv.URL+"/admin/reload", testToken, ""); code != http.StatusUnprocessableEntity || !strings.Contains(body, "chains[0].name") {
		t.Errorf("invalid reload = %d %s, want 422 with the problems", code, body)
	}
	applied.Store(true)
	if code, _ := testkit.AdminDo(t, "POST", r.srv.URL+"/admin/reload", testToken, ""); code != http.StatusOK {
		t.Errorf("reload = %d", code)
	}
	if code, body := testkit.AdminDo(t, "POST", r.srv.URL+"/admin/drain", testToken, ""); code != http.StatusOK || !strings.Contains(body, `"hooks"`) {
		t.Errorf("drain = %d %s", code, body)
	}
	if !r.admin.Draining() || bare.admin.Draining() {
		t.Error("draining: want the drained replica only")
	}
	for _, tt := range []struct {
		r               *replica
		action, outcome string
	}{{r, actionReload, outcomeError}, {r, actionReload, outcomeOK}, {r, actionDrain, outcomeOK}, {bare, actionReload, outcomeRefused}} {
		if n := testutil.ToFloat64(tt.r.admin.m.actions.WithLabelValues(tt.action, tt.outcome)); n != 1 {
			t.Errorf("venn_admin_actions_total{%s,%s} = %v, want 1", tt.action, tt.outcome, n)
		}
	}
}

// TestCordonRequests: what a cordon request may say.
func TestCordonRequests(t *testing.T) {
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100}), fakenode.Start(t, fakenode.Options{Head: 100})}
	r := startReplica(t, "reqs", "solo", nodes, nil, &clock{now: time.Now()})
	base := r.srv.URL + "/admin/chains/"
	tests := []struct {
		path, body string
		want       int
	}{
		{"reqs/remotes/n0/cordon", `{"for":"5m","reason":"ok"}`, http.StatusOK},
		{"reqs/remotes/n0/cordon", `{"until":"2001-01-01T00:00:00Z"}`, http.StatusBadRequest},
		{"reqs/remotes/n0/cordon", `{"for":"-1m"}`, http.StatusBadRequest},
		{"reqs/remotes/n0/cordon", `{"for":"soon"}`, http.StatusBadRequest},
		{"reqs/remotes/n0/cordon", `{"reason":"` + strings.Repeat("x", 300) + `"}`, http.StatusBadRequest},
		{"reqs/remotes/n0/cordon", `{"nope":1}`, http.StatusBadRequest},
		{"reqs/remotes/nx/cordon", `{}`, http.StatusNotFound},
		{"other/remotes/n0/cordon", `{}`, http.StatusNotFound},
		{"reqs/remotes/n0/uncordon", ``, http.StatusOK},
	}
	for _, tt := range tests {
		if code, body := testkit.AdminDo(t, "POST", base+tt.path, testToken, tt.body); code != tt.want {
			t.Errorf("POST %s %s = %d %s, want %d", tt.path, tt.body, code, body, tt.want)
		}
	}
}

// TestSetChains: a pool handed over by a reload gets the stored cordons at
// once.
func TestSetChains(t *testing.T) {
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100}), fakenode.Start(t, fakenode.Options{Head: 100})}
	r := startReplica(t, "reload", "solo", nodes, nil, &clock{now: time.Now()})
	if code, body := testkit.AdminDo(t, "POST", r.srv.URL+"/admin/chains/reload/remotes/n1/cordon", testToken, `{}`); code != http.StatusOK {
		t.Fatalf("cordon = %d %s", code, body)
	}
	fresh := startPool(t, "reload", nodes, prometheus.NewRegistry())
	r.admin.setChains(context.Background(), []Chain{{Name: "reload", Path: "/reload", Pool: fresh, Heads: fresh.Heads()}})
	if !outBy(fresh, "n1") {
		t.Fatalf("the new pool lacks the cordon: %+v", fresh.Status())
	}
	if _, body := testkit.AdminDo(t, "GET", r.srv.URL+"/admin/chains/reload", testToken, ""); !strings.Contains(body, `"cordoned"`) {
		t.Errorf("the chain view is not the new pool's: %s", body)
	}
}
