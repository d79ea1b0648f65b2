package deploy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/freeport"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// exported is what a running venn exports: every metric family its
// registry describes (a vector with no series yet is described, though
// not gathered), the type of each family gathered, and the addresses of
// its metrics listener and admin API.
type exported struct {
	names       map[string]bool
	types       map[string]dto.MetricType
	metricsAddr string
	adminAddr   string
}

// adminToken is the running venn's admin token.
const adminToken = "deploy-test-admin-token"

// histograms the dashboard and rules take quantiles of: the scenario in
// startVenn waits until each has been gathered as a histogram.
var histograms = []string{
	"venn_request_duration_seconds", "venn_remote_call_duration_seconds", "venn_call_attempts",
	"venn_head_propagation_seconds", "venn_stalker_fetch_seconds", "venn_reorg_depth",
	"venn_subscription_dispatch_seconds",
}

// descName reads a Desc's fully-qualified name: client_golang has no
// accessor, and String is its one stable rendering.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// startVenn runs venn in-process as a cluster replica (the machine's Redis,
// a fresh Postgres, a fake node with rate limits on, the request log on so
// its series exist, the admin API with a token), calls it, mines, reorgs,
// subscribes, and returns what it exports. It is stopped when the test
// ends.
func startVenn(t *testing.T) *exported {
	t.Helper()
	v := launchVenn(t)
	node, reg, rpcAddr, chain := v.node, v.reg, v.rpcAddr, v.chain
	metricsAddr, adminAddr := v.metricsAddr, v.adminAddr
	client := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	rpc := "http://" + rpcAddr + "/" + chain
	sub := subscribe(t, "ws://"+rpcAddr+"/"+chain)
	for _, call := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`,
		`{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["latest",false]}`,
		`{"jsonrpc":"2.0","id":3,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}`,
		`{"jsonrpc":"2.0","id":4,"method":"eth_nosuchmethod","params":[]}`,
	} {
		resp, err := client.Post(rpc, "application/json", strings.NewReader(call))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	node.Mine(3)
	if msg := testkit.WSRead(t, sub); !strings.Contains(msg, `"eth_subscription"`) {
		t.Fatalf("after mining, the subscription got %s, want a notification", msg)
	}
	node.Reorg(2)
	node.Mine(2)

	out := &exported{names: map[string]bool{}, metricsAddr: metricsAddr, adminAddr: adminAddr}
	descs := make(chan *prometheus.Desc)
	go func() { reg.Describe(descs); close(descs) }()
	for d := range descs {
		m := descName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		out.names[m[1]] = true
	}
	testkit.WaitFor(t, 20*time.Second, "every histogram to be gathered", func() bool {
		out.types = gatherTypes(t, reg)
		for _, h := range histograms {
			if out.types[h] != dto.MetricType_HISTOGRAM {
				return false
			}
		}
		return true
	})
	return out
}

func gatherTypes(t *testing.T, reg prometheus.Gatherer) map[string]dto.MetricType {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]dto.MetricType{}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType()
	}
	return types
}

// subscribe opens a WebSocket to url and subscribes to newHeads.
func subscribe(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)
	if reply := testkit.WSRead(t, c); !strings.Contains(reply, `"result"`) {
		t.Fatalf("eth_subscribe: %s", reply)
	}
	return c
}

func status(c *http.Client, url string) int { return statusWith(c, url, "") }

// statusWith GETs url, with token as a bearer token unless it is "".
func statusWith(c *http.Client, url, token string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// freeAddrs is n free addresses on 127.0.0.1, all different
// (freeport.Ports).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	ports, err := freeport.Ports(n)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs
}

// running is a venn started by launchVenn.
type running struct {
	node                            *fakenode.Node
	reg                             *prometheus.Registry
	rpcAddr, metricsAddr, adminAddr string
	chain                           string
}

// launchVenn runs venn in-process as a cluster replica (the machine's
// Redis, a fresh Postgres, a fake node with rate limits on, the request
// log on, the admin API with a token) and waits until it is ready. It is
// stopped when the test ends.
func launchVenn(t *testing.T) *running {
	t.Helper()
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, BlockTime: time.Second, FinalizedDepth: 8, SafeDepth: 4})
	// The machine's Redis, shared: keys no other test uses, deleted at
	// cleanup (after venn stops: cleanups run last first).
	_, token := testkit.Redis(t, func(token string) string { return "venn:{ops" + token + "}:*" })
	chain := "ops" + token
	addrs := freeAddrs(t, 3)
	rpcAddr, metricsAddr, adminAddr := addrs[0], addrs[1], addrs[2]
	cfg, err := app.Parse([]byte(fmt.Sprintf(`
listen: %s
metrics_listen: %s
log: {level: debug}
shutdown_timeout: 5s
redis: {url: "redis://%s/0"}
postgres: {url: %q}
rate_limits: {ip: {rps: 100000}}
request_log: {enabled: true, output: %q}
admin_listen: %s
admin: {tokens: [{name: ops, token: %s}]}
chains:
  - name: %s
    chain_id: 1337
    block_time: 50ms
    head: {window: 16}
    history: {confirmations: 4, batch: 5}
    remotes: [{name: node, url: %q, ws_url: %q}]
`, rpcAddr, metricsAddr, testkit.RedisAddr, pgtest.Empty(t), filepath.Join(t.TempDir(), "requests.log"),
		adminAddr, adminToken, chain, node.URL(), node.WSURL())))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	var reg *prometheus.Registry
	a := app.New(cfg, app.LogOutput(logs), fx.Populate(&reg))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatalf("start venn: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop venn: %v", err)
		}
		if t.Failed() {
			t.Logf("venn logs:\n%s", logs)
		}
	})
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	testkit.WaitFor(t, 20*time.Second, "/readyz to say 200", func() bool {
		return status(client, "http://"+metricsAddr+"/readyz") == http.StatusOK
	})
	return &running{node: node, reg: reg, rpcAddr: rpcAddr, metricsAddr: metricsAddr, adminAddr: adminAddr, chain: chain}
}
