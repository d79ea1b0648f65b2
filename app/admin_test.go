package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/stalker"
)

const adminToken = "ADMINTOKEN-0123456789abcdef"

// secrets are every secret the admin test's config holds: none may appear
// in an admin answer, /readyz, /metrics or the logs.
var secrets = []string{"PATHSECRET", "QUERYSECRET", "HEADERSECRET", "PASSSECRET", "DOWNSECRET",
	"EDGEAPIKEY", adminToken, "REDISPASS", "PGSECRET"}

// adminConfig is chain "test" in front of node (its URL carrying secrets
// in the path, query and a header) and a down remote with a password, an
// API key and an admin token; extra is more YAML.
func adminConfig(t *testing.T, node *fakenode.Node, extra string) *Config {
	t.Helper()
	return mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
log: {level: info}
shutdown_timeout: 5s
admin:
  tokens: [{name: ops, token: `+adminToken+`}]
auth:
  keys: [{name: app, key: EDGEAPIKEY-0123456789}]
`+extra+`
chains:
  - name: test
    chain_id: 1337
    remotes:
      - name: good
        url: `+node.URL()+`/PATHSECRET?apikey=QUERYSECRET
        headers: {X-Api-Key: HEADERSECRET}
      - name: down
        url: http://user:PASSSECRET@`+testkit.ClosedAddr(t)+`/DOWNSECRET
        tier: secondary
        timeout: 300ms
`)
}

type adminApp struct {
	admin, metrics string
	logs           *testkit.Buffer
	stop           func()
}

func startAdminApp(t *testing.T, cfg *Config) *adminApp {
	t.Helper()
	logs := &testkit.Buffer{}
	var (
		s  *servers
		as *adminServer
	)
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(logs), WithBuild(BuildInfo{Version: "v-test"}), fx.Populate(&s, &as))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return &adminApp{admin: "http://" + as.svc.bound.String(), metrics: "http://" + s.metrics.bound.String(), logs: logs}
}

// TestAdminNeverShowsASecret reads every admin endpoint, acts, and reads
// /readyz, /metrics and the logs: no secret of the config is in any.
func TestAdminNeverShowsASecret(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	a := startAdminApp(t, adminConfig(t, node, ""))
	testkit.WaitFor(t, 5*time.Second, "the down remote's last error", func() bool {
		_, body := testkit.AdminDo(t, "GET", a.admin+"/admin/chains/test", adminToken, "")
		return strings.Contains(body, `"last_error"`)
	})
	bodies := map[string]string{}
	for _, p := range []string{"/admin/status", "/admin/chains", "/admin/chains/test", "/admin/replicas", "/admin/config"} {
		code, body := testkit.AdminDo(t, "GET", a.admin+p, adminToken, "")
		if code != http.StatusOK {
			t.Errorf("GET %s = %d %s", p, code, body)
		}
		if code, _ := testkit.AdminDo(t, "GET", a.admin+p, "", ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token = %d, want 401", p, code)
		}
		bodies[p] = body
	}
	_, bodies["cordon"] = testkit.AdminDo(t, "POST", a.admin+"/admin/chains/test/remotes/down/cordon", adminToken, `{"reason":"test"}`)
	_, bodies["uncordon"] = testkit.AdminDo(t, "POST", a.admin+"/admin/chains/test/remotes/down/uncordon", adminToken, ``)
	for k, v := range statusPages(t, a.admin) {
		bodies[k] = v
	}
	_, bodies["/readyz"] = get(t, http.DefaultClient, a.metrics+"/readyz")
	_, bodies["/metrics"] = get(t, http.DefaultClient, a.metrics+"/metrics")
	bodies["logs"] = a.logs.String()
	for _, p := range []string{"/admin/chains/test", "sign-in page", "/status", "/status/chains/test"} {
		if strings.Contains(bodies[p], "127.0.0.1") {
			t.Errorf("%s shows an IP address: %s", p, bodies[p])
		}
	}
	if !strings.Contains(bodies["/status/chains/test"], "down") {
		t.Errorf("the chain page lacks the failing remote: %s", bodies["/status/chains/test"])
	}
	for where, body := range bodies {
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s shows %s:\n%s", where, s, body)
			}
		}
	}
	nodeURL, _ := url.Parse(node.URL())
	if !strings.Contains(bodies["/admin/config"], `"url": "http://[redacted]:`+nodeURL.Port()+`/[redacted]"`) {
		t.Errorf("config does not show the remote URL redacted:\n%s", bodies["/admin/config"])
	}
	var ov admin.Overview
	if err := json.Unmarshal([]byte(bodies["/admin/status"]), &ov); err != nil || len(ov.Chains) != 1 ||
		len(ov.Chains[0].Remotes) != 2 || ov.Version != "v-test" {
		t.Fatalf("status %s: %v", bodies["/admin/status"], err)
	}
	if rs := ov.Chains[0].Remotes; !rs[0].InRotation || rs[1].InRotation || len(rs[1].Out) == 0 {
		t.Errorf("remotes %+v: want good in rotation, down out with a reason", rs)
	}
	for _, want := range []string{`msg=venn version=v-test config="built-in default"`,
		`msg=chain chain=test chain_id=1337 path=/test remotes="good (primary), down (secondary)" head_store=memory history_store=off`,
		`msg="admin API" admin_listen=127.0.0.1:0 tokens=1`} {
		if !strings.Contains(bodies["logs"], want) {
			t.Errorf("logs lack %s", want)
		}
	}
}

// statusPages reads the status page's sign-in page, then signs in and
// reads the overview and chain test's page.
func statusPages(t *testing.T, base string) map[string]string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	out := map[string]string{}
	if _, out["sign-in page"] = get(t, c, base+"/status"); !strings.Contains(out["sign-in page"], `name="token"`) {
		t.Errorf("not the sign-in page: %s", out["sign-in page"])
	}
	req, _ := http.NewRequest("POST", base+"/status/login", strings.NewReader(url.Values{"token": {adminToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, p := range []string{"/status", "/status/chains/test"} {
		code, body := get(t, c, base+p)
		if code != http.StatusOK {
			t.Errorf("GET %s signed in = %d", p, code)
		}
		out[p] = body
	}
	return out
}

// TestRedactConfig: every secret of a full config is redacted, the rest
// kept.
func TestRedactConfig(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	cfg := adminConfig(t, node, "redis: {url: \"redis://:REDISPASS@127.0.0.1:6379/0\"}\npostgres: {url: \"postgres://venn:PGSECRET@127.0.0.1:5432/venn\"}")
	v, err := admin.Redact(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			t.Errorf("redacted config shows %s: %s", s, b)
		}
	}
	for _, want := range []string{`"name":"good"`, `"X-Api-Key":"[redacted]"`, `"url":"redis://[redacted]:6379/[redacted]"`, `"chain_id":1337`, `"name":"ops"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("redacted config lacks %s: %s", want, b)
		}
	}
}

// TestDrainHandsLeadershipOver: two replicas on the real Redis; draining
// the leader turns its /readyz 503, with the reason, and the other takes
// the chain's lease.
func TestDrainHandsLeadershipOver(t *testing.T) {
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:{*" + token + "*}*" })
	chain := "drain-" + token
	ids := []string{"a-" + token, "b-" + token}
	t.Cleanup(func() { rdb.HDel(context.Background(), keyspace.Replicas, ids...) })
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	conf := func(id string) *Config {
		return mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
log: {level: warn}
shutdown_timeout: 5s
redis: {url: `+testRedisURL+`, replica_id: `+id+`, lease_ttl: 1s}
chains:
  - name: `+chain+`
    chain_id: 1337
    remotes: [{name: n0, url: `+node.URL()+`}]
`)
	}
	leader := func() string {
		l, ok, err := stalker.ReadLeader(context.Background(), rdb, chain)
		if err != nil || !ok {
			return ""
		}
		return l.Replica
	}
	a := startAdminApp(t, conf(ids[0]))
	// a leads in Redis and in its own view: its lease is written a moment
	// before its loop takes the lead, and a drain in between has nothing
	// to hand over.
	testkit.WaitFor(t, 5*time.Second, "a leads", func() bool {
		_, body := testkit.AdminDo(t, "GET", a.admin+"/admin/chains/"+chain, "", "")
		return leader() == ids[0] && strings.Contains(body, `"leading": true`)
	})
	b := startAdminApp(t, conf(ids[1]))

	code, body := testkit.AdminDo(t, "POST", a.admin+"/admin/drain", "", "")
	if code != http.StatusOK || !strings.Contains(body, `"released": [`+"\n"+`    "`+chain+`"`) {
		t.Fatalf("drain = %d %s", code, body)
	}
	testkit.WaitFor(t, 3*time.Second, "b leads", func() bool { return leader() == ids[1] })
	code, body = get(t, http.DefaultClient, a.metrics+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"reason":"draining`) {
		t.Errorf("a's readyz = %d %s, want 503 draining", code, body)
	}
	if code, body := get(t, http.DefaultClient, b.metrics+"/readyz"); code != http.StatusOK {
		t.Errorf("b's readyz = %d %s", code, body)
	}
	_, body = testkit.AdminDo(t, "GET", b.admin+"/admin/chains/"+chain, "", "")
	if !strings.Contains(body, `"replica": "`+ids[1]+`"`) || !strings.Contains(body, `"leading": true`) {
		t.Errorf("b's chain view: %s", body)
	}
}

// TestAdminConfig: where the admin API may serve, and its tokens.
func TestAdminConfig(t *testing.T) {
	tests := []struct {
		give string
		want string // "" valid
	}{
		{give: "admin_listen: 127.0.0.1:9546"},
		{give: "admin_listen: localhost:9546"},
		{give: "admin_listen: \"[::1]:9546\""},
		{give: "admin_listen: 0.0.0.0:9546", want: "admin_listen: the admin API without admin.tokens binds only to a loopback address"},
		{give: "admin_listen: 0.0.0.0:9546\nadmin: {tokens: [{name: ops, token: " + adminToken + "}]}"},
		{give: "metrics_listen: 0.0.0.0:9545\nadmin: {on_metrics_listen: true}", want: "metrics_listen: the admin API without admin.tokens"},
		{give: "metrics_listen: \"\"\nadmin: {on_metrics_listen: true}", want: "admin.on_metrics_listen: metrics_listen is off"},
		{give: "admin_listen: 127.0.0.1:9546\nadmin: {on_metrics_listen: true}", want: "admin.on_metrics_listen: admin_listen is set too"},
		{give: "admin: {tokens: [{name: ops, token: short}]}", want: "admin.tokens[0].token: must be at least 16 characters"},
		{give: "admin: {tokens: [{token: " + adminToken + "}]}", want: "admin.tokens[0].name: required"},
		{give: "admin: {tokens: [{name: a, token: " + adminToken + "}, {name: a, token: " + adminToken + "x}]}", want: `admin.tokens[1].name: "a" is already used`},
		{give: "admin_listen: 127.0.0.1:8545", want: "admin_listen: must differ from listen"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.give + minimal))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.give, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.give, err, tt.want)
		case err != nil && strings.Contains(err.Error(), adminToken):
			t.Errorf("%s: the error quotes a token: %v", tt.give, err)
		}
	}
}

// TestAdminOnMetricsListen serves the API on the metrics listener.
func TestAdminOnMetricsListen(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
log: {level: warn}
admin: {on_metrics_listen: true}
chains:
  - name: test
    chain_id: 1337
    remotes: [{name: n0, url: `+node.URL()+`}, {name: n1, url: `+node.URL()+`}]
`)
	s := startApp(t, cfg)
	base := "http://" + s.metrics.bound.String()
	// A cordon applies only while another remote is in rotation: wait for
	// both to be.
	testkit.WaitFor(t, 10*time.Second, "both remotes in rotation", func() bool {
		_, body := testkit.AdminDo(t, "GET", base+"/admin/chains/test", "", "")
		return strings.Contains(body, `"remotes_in_rotation": 2`)
	})
	code, body := testkit.AdminDo(t, "POST", base+"/admin/chains/test/remotes/n1/cordon", "", `{"for":"1h"}`)
	if code != http.StatusOK || !strings.Contains(body, `"applied": true`) {
		t.Fatalf("cordon = %d %s", code, body)
	}
	if code, body := testkit.AdminDo(t, "GET", base+"/admin/chains/test", "", ""); code != http.StatusOK || !strings.Contains(body, `"code": "cordoned"`) {
		t.Errorf("chain = %d %s", code, body)
	}
	if _, body := get(t, http.DefaultClient, base+"/metrics"); !strings.Contains(body, `venn_remote_cordoned{chain="test",remote="n1"} 1`) ||
		!strings.Contains(body, `venn_admin_actions_total{action="cordon",outcome="ok"} 1`) {
		t.Errorf("metrics lack the cordon")
	}
}

// TestOneReplicaIDPerProcess: a process alone (no Redis) names itself
// once: the start line, the election's "leader elected", the admin API
// and venn_replica_info all carry the same replica id.
func TestOneReplicaIDPerProcess(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	a := startAdminApp(t, adminConfig(t, node, ""))
	testkit.WaitFor(t, 5*time.Second, "leader elected", func() bool { return strings.Contains(a.logs.String(), "leader elected") })
	ids := map[string]bool{}
	for line := range strings.SplitSeq(a.logs.String(), "\n") {
		if _, rest, ok := strings.Cut(line, " replica="); ok {
			id, _, _ := strings.Cut(rest, " ")
			ids[id] = true
		}
	}
	if len(ids) != 1 {
		t.Fatalf("the logs name replicas %v, want one", ids)
	}
	var id string
	for id = range ids {
	}
	if _, body := testkit.AdminDo(t, "GET", a.admin+"/admin/status", adminToken, ""); !strings.Contains(body, `"replica": "`+id+`"`) {
		t.Errorf("/admin/status does not name replica %s: %.300s", id, body)
	}
	if v, ok := metricValue(t, http.DefaultClient, a.metrics, `venn_replica_info{replica="`+id+`",version="v-test"}`); !ok || v != 1 {
		t.Errorf("venn_replica_info{replica=%q} = %v, %v; want 1", id, v, ok)
	}
}
