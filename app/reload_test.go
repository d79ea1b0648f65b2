package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/emerald"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/status"
)

// reloadApp is venn started from a file a test rewrites and reloads.
type reloadApp struct {
	file     string
	reloader *Reloader
	servers  *servers
	log      *slog.Logger
	signals  chan os.Signal
	reg      *prometheus.Registry
	admin    *adminServer
	grpc     *emerald.Server // nil without grpc_listen
}

// startReloadApp writes y to a file, starts venn from it, with reload
// signals injected, and stops it when the test ends.
func startReloadApp(t *testing.T, y string) *reloadApp {
	t.Helper()
	a := &reloadApp{file: filepath.Join(t.TempDir(), "venn.yaml"), signals: make(chan os.Signal, 1)}
	a.write(t, y)
	cfg, err := Load(a.file)
	if err != nil {
		t.Fatal(err)
	}
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(&testkit.Buffer{}), ReloadSignals(a.signals),
		fx.Populate(&a.reloader, &a.servers, &a.log, &a.reg, &a.admin, &a.grpc))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return a
}

func (a *reloadApp) write(t *testing.T, y string) {
	t.Helper()
	if err := os.WriteFile(a.file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload rewrites the file with y and reloads it.
func (a *reloadApp) reload(t *testing.T, y string) *ReloadReport {
	t.Helper()
	a.write(t, y)
	rep, applied := a.reloader.Reload(context.Background())
	r := rep.(*ReloadReport)
	if applied != r.Applied {
		t.Errorf("Reload says applied %v, its report %v", applied, r.Applied)
	}
	return r
}

func (a *reloadApp) rpc(chain string) string {
	return "http://" + a.servers.rpc.bound.String() + "/" + chain
}

func (a *reloadApp) ws(chain string) string {
	return "ws://" + a.servers.rpc.bound.String() + "/" + chain
}

// reloadYAML is chain "test" (and more YAML after) in front of remotes.
func reloadYAML(level string, remotes []string, more string) string {
	y := "listen: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nlog: {level: " + level + "}\nshutdown_timeout: 5s\n" +
		"chains:\n  - name: test\n    chain_id: 1337\n    scoring: {interval: 1s}\n    remotes:\n"
	for _, r := range remotes {
		y += "      - " + r + "\n"
	}
	return y + more
}

func remoteYAML(name string, n *fakenode.Node) string {
	return "{name: " + name + ", url: " + n.URL() + "}"
}

// subscriber is a newHeads subscription that records every head number.
type subscriber struct {
	conn    *websocket.Conn
	mu      sync.Mutex
	heads   []uint64
	closeBy error // why the reader stopped
	done    chan struct{}
}

func subscribeHeads(t *testing.T, url string) *subscriber {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)
	if got := testkit.WSRead(t, c); !strings.Contains(got, `"result":"0x`) {
		t.Fatalf("eth_subscribe: %s", got)
	}
	s := &subscriber{conn: c, done: make(chan struct{})}
	go s.read()
	t.Cleanup(func() { c.CloseNow(); <-s.done })
	return s
}

func (s *subscriber) read() {
	defer close(s.done)
	for {
		_, b, err := s.conn.Read(context.Background())
		if err != nil {
			s.mu.Lock()
			s.closeBy = err
			s.mu.Unlock()
			return
		}
		var n struct {
			Params struct {
				Result struct {
					Number string `json:"number"`
				} `json:"result"`
			} `json:"params"`
		}
		if json.Unmarshal(b, &n) == nil && len(n.Params.Result.Number) > 2 {
			h, _ := strconv.ParseUint(n.Params.Result.Number[2:], 16, 64)
			s.mu.Lock()
			s.heads = append(s.heads, h)
			s.mu.Unlock()
		}
	}
}

func (s *subscriber) seen() ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.heads), s.closeBy
}

// load calls eth_getBalance from workers until stopped, counting errors.
type load struct {
	calls, errs atomic.Int64
	lastErr     atomic.Pointer[string]
	stop        chan struct{}
	wg          sync.WaitGroup
}

func startLoad(t *testing.T, url string, workers int) *load {
	l := &load{stop: make(chan struct{})}
	c := &http.Client{Timeout: 10 * time.Second}
	for w := range workers {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x%040x","latest"]}`, w*1_000_000+i)
				resp, err := c.Post(url, "application/json", strings.NewReader(body))
				l.calls.Add(1)
				if err != nil {
					l.fail(err.Error())
					continue
				}
				var r wireResponse
				err = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if err != nil || r.Error != nil || resp.StatusCode != http.StatusOK {
					l.fail(fmt.Sprintf("status %d: %+v %v", resp.StatusCode, r.Error, err))
				}
			}
		})
	}
	t.Cleanup(l.end)
	return l
}

func (l *load) fail(msg string) {
	l.errs.Add(1)
	l.lastErr.Store(&msg)
}

func (l *load) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// A reload adds a remote while clients call and subscribe: no call
// fails, the subscriber stays connected and sees every block, and the new
// remote takes calls within one scoring interval.
func TestReloadAddsRemoteUnderLoad(t *testing.T) {
	opts := fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime}
	a, b := fakenode.Start(t, opts), fakenode.Start(t, opts)
	fakenode.MineEvery(t, headsBlockTime, a, b)
	app := startReloadApp(t, reloadYAML("warn", []string{remoteYAML("a", a)}, ""))
	sub := subscribeHeads(t, app.ws("test"))
	testkit.WaitFor(t, 10*time.Second, "the subscriber's first heads", func() bool {
		h, _ := sub.seen()
		return len(h) >= 2
	})
	l := startLoad(t, app.rpc("test"), 4)
	testkit.WaitFor(t, 10*time.Second, "calls under way", func() bool { return l.calls.Load() > 20 })

	rep := app.reload(t, reloadYAML("warn", []string{remoteYAML("a", a), remoteYAML("b", b)}, ""))
	at := time.Now()
	if !rep.Applied || !slices.Contains(rep.Changes, "chain test: remote b added") {
		t.Fatalf("report %+v", rep)
	}
	// One scoring interval (scoring.interval above): a new remote starts
	// preferred, so it takes calls as soon as it is followed.
	testkit.WaitFor(t, time.Second, "the new remote taking calls", func() bool { return b.Calls("eth_getBalance") > 0 })
	t.Logf("new remote took its first call %v after the reload", time.Since(at).Round(time.Millisecond))
	seenAt := a.Head()
	testkit.WaitFor(t, 10*time.Second, "three more heads after the reload", func() bool {
		h, _ := sub.seen()
		return len(h) > 0 && h[len(h)-1] >= seenAt+3
	})
	l.end()

	if n := l.errs.Load(); n > 0 {
		t.Errorf("%d of %d calls failed; last: %s", n, l.calls.Load(), *l.lastErr.Load())
	}
	heads, closed := sub.seen()
	if closed != nil {
		t.Errorf("subscriber disconnected: %v", closed)
	}
	for i := 1; i < len(heads); i++ {
		if heads[i] != heads[i-1]+1 {
			t.Errorf("subscriber saw head %d after %d: a block is missing", heads[i], heads[i-1])
		}
	}
}

// A reload that removes the remote a call is in flight on: the call
// still answers, from that remote.
func TestReloadRemovesRemoteInFlight(t *testing.T) {
	opts := fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime}
	a, b := fakenode.Start(t, opts), fakenode.Start(t, opts)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	a.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBalance" {
			select {
			case entered <- struct{}{}:
				<-release
			default:
			}
		}
		return nil, nil, false
	})
	withTiers := func(rs ...string) []string { return rs }
	app := startReloadApp(t, reloadYAML("warn", withTiers(remoteYAML("a", a), "{name: b, url: "+b.URL()+", tier: fallback}"), ""))
	// The pool starts once one remote is ready: under load that may be
	// the fallback alone, which would take the call.
	testkit.WaitFor(t, 20*time.Second, "remote a in rotation", func() bool {
		for _, r := range status.ReasonsOf(app.chainNamed("test").Pool().Status()) {
			if r.Remote == "a" {
				return r.InRotation
			}
		}
		return false
	})
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	answer := make(chan wireResponse, 1)
	go func() {
		answer <- post(t, c, app.rpc("test"), `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}`)
	}()
	select {
	case <-entered:
	case r := <-answer:
		t.Fatalf("the call did not reach remote a: %+v", r)
	}
	rep := app.reload(t, reloadYAML("warn", []string{remoteYAML("b", b)}, ""))
	if !slices.Contains(rep.Changes, "chain test: remote a removed (its calls in flight finish on it)") {
		t.Errorf("report %+v", rep)
	}
	close(release)
	if r := <-answer; r.Error != nil || len(r.Result) == 0 {
		t.Fatalf("call in flight on the removed remote: %+v", r)
	}
	if got := b.Calls("eth_getBalance"); got != 0 {
		t.Errorf("the kept remote took %d calls: the call did not finish where it started", got)
	}
}

// An invalid file changes nothing, and the answer lists every problem,
// as check-config does.
func TestReloadInvalidChangesNothing(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	good := reloadYAML("warn", []string{remoteYAML("a", a)}, "")
	app := startReloadApp(t, good)
	bad := strings.Replace(good, "chain_id: 1337", "chain_id: 0", 1)
	bad = strings.Replace(bad, "log: {level: warn}", "log: {level: loud}", 1)
	bad = strings.Replace(bad, "scoring: {interval: 1s}", "scoring: {interval: 1s}\n    max_attempts: -1", 1)
	_, want := Parse([]byte(bad))
	rep := app.reload(t, bad)
	if rep.Applied || len(rep.Changes) != 0 {
		t.Errorf("an invalid file was applied: %+v", rep)
	}
	if got, want := strings.Join(rep.Problems, "\n"), want.Error(); got != want || len(rep.Problems) < 3 {
		t.Errorf("problems:\n%s\nwant (check-config's):\n%s", got, want)
	}
	if !app.log.Enabled(context.Background(), slog.LevelWarn) || app.log.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("the log level changed")
	}
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	if r := post(t, c, app.rpc("test"), `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`); string(r.Result) != `"0x539"` {
		t.Errorf("eth_chainId after the refused reload: %+v", r)
	}
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), `"applied":false,"changes":[],"problems":["`) || !strings.Contains(string(b), `"restart_required":[]`) {
		t.Errorf("report JSON %s", b)
	}
}

// SIGHUP reloads (the signal injected: a test must not signal its own
// process), and a new log level takes effect.
func TestReloadSignalSetsLogLevel(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	app := startReloadApp(t, reloadYAML("warn", []string{remoteYAML("a", a)}, ""))
	if app.log.Enabled(context.Background(), slog.LevelDebug) {
		t.Fatal("debug enabled at warn")
	}
	app.write(t, reloadYAML("debug", []string{remoteYAML("a", a)}, ""))
	app.signals <- syscall.SIGHUP
	testkit.WaitFor(t, 5*time.Second, "debug logging after SIGHUP", func() bool {
		return app.log.Enabled(context.Background(), slog.LevelDebug)
	})
}

// Removing a chain closes its WebSocket clients with a close frame and a
// reason; the other chain serves on; a changed listen address is named as
// needing a restart, and a new chain is served.
func TestReloadRemovesAndAddsChains(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	o := fakenode.Start(t, fakenode.Options{ChainID: 10, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a, o)
	other := "  - name: other\n    chain_id: 10\n    remotes:\n      - " + remoteYAML("o", o) + "\n"
	app := startReloadApp(t, reloadYAML("warn", []string{remoteYAML("a", a)}, other))
	sub := subscribeHeads(t, app.ws("other"))
	kept := subscribeHeads(t, app.ws("test"))

	next := strings.Replace(reloadYAML("warn", []string{remoteYAML("a", a)}, ""), "listen: 127.0.0.1:0", "listen: 127.0.0.1:1", 1)
	next += "  - name: third\n    chain_id: 10\n    remotes:\n      - " + remoteYAML("o", o) + "\n"
	rep := app.reload(t, next)
	if !rep.Applied || !slices.Contains(rep.Changes, "chain other removed (1 WebSocket connections closed)") ||
		!slices.Contains(rep.Changes, "chain third added") || !slices.Equal(rep.RestartRequired, []string{"listen"}) {
		t.Fatalf("report %+v", rep)
	}
	<-sub.done
	_, err := sub.seen()
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || !strings.Contains(ce.Reason, "chain other removed") {
		t.Errorf("removed chain's subscriber: %v, want close 1001 with a reason", err)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	if r := post(t, c, app.rpc("third"), `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`); string(r.Result) != `"0xa"` {
		t.Errorf("new chain: %+v", r)
	}
	if r := post(t, c, app.rpc("other"), `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`); r.Error == nil || r.Error.Code != jrpc.CodeUnknownChain {
		t.Errorf("removed chain still served: %+v", r)
	}
	seen, _ := kept.seen()
	testkit.WaitFor(t, 10*time.Second, "the kept chain's subscriber getting heads", func() bool {
		h, closed := kept.seen()
		return closed == nil && len(h) > len(seen)
	})
	// The restart is named again until it happens.
	if rep := app.reload(t, next); !slices.Equal(rep.RestartRequired, []string{"listen"}) || len(rep.Changes) != 0 {
		t.Errorf("second reload: %+v", rep)
	}
}

// TestAdminReload reloads through the admin API: the chains it shows and
// the config it shows are the reloaded ones.
func TestAdminReload(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	o := fakenode.Start(t, fakenode.Options{ChainID: 10, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a, o)
	y := reloadYAML("warn", []string{remoteYAML("a", a)}, "")
	y = strings.Replace(y, "metrics_listen: 127.0.0.1:0\n", "metrics_listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n", 1)
	app := startReloadApp(t, y)
	base := "http://" + app.admin.svc.bound.String()
	if code, body := testkit.AdminDo(t, http.MethodGet, base+"/admin/chains", "", ""); code != http.StatusOK || strings.Contains(body, `"third"`) {
		t.Fatalf("before: %d %s", code, body)
	}
	app.write(t, y+"  - name: third\n    chain_id: 10\n    remotes:\n      - "+remoteYAML("o", o)+"\n")
	code, body := testkit.AdminDo(t, http.MethodPost, base+"/admin/reload", "", "")
	if code != http.StatusOK || !strings.Contains(body, "chain third added") {
		t.Fatalf("POST /admin/reload: %d %s", code, body)
	}
	if code, body := testkit.AdminDo(t, http.MethodGet, base+"/admin/chains", "", ""); code != http.StatusOK || !strings.Contains(body, `"third"`) {
		t.Errorf("the admin API's chains after the reload: %d %s", code, body)
	}
	if _, body := testkit.AdminDo(t, http.MethodGet, base+"/admin/config", "", ""); !strings.Contains(body, `"third"`) {
		t.Errorf("the admin API's config after the reload: %s", body)
	}
}

// Without --config there is nothing to re-read.
func TestReloadWithoutFile(t *testing.T) {
	r := &Reloader{log: slog.New(slog.DiscardHandler)}
	rep, applied := r.Reload(context.Background())
	if applied || !strings.Contains(strings.Join(rep.(*ReloadReport).Problems, ""), "no config file") {
		t.Errorf("reload without a file: %+v", rep)
	}
}

// TestReloadCacheSettings turns a chain's response cache off and on again
// by reload: off, calls are not cached; on again, they are, on a fresh
// memory tier.
func TestReloadCacheSettings(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, FinalizedDepth: 8, SafeDepth: 4})
	y := func(cache string) string {
		return "listen: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nshutdown_timeout: 5s\nchains:\n" +
			"  - name: test\n    chain_id: 1337\n    block_time: 50ms\n    head: {window: 16}\n" +
			"    integrity: {stalker: false}\n    cache: " + cache + "\n    remotes:\n      - " + remoteYAML("node", node) + "\n"
	}
	app := startReloadApp(t, y("{enabled: true}"))
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	rpc := app.rpc("test")
	testkit.WaitFor(t, 10*time.Second, "the cache to key a settled call", func() bool {
		_, word := cachedCall(t, client, rpc, probeBlock)
		return word == "hit"
	})

	rep := app.reload(t, y("{enabled: false}"))
	if !rep.Applied || !slices.Contains(rep.Changes, "chain test: cache off") {
		t.Fatalf("turning the cache off: %+v", rep)
	}
	if _, word := cachedCall(t, client, rpc, probeBlock); word != "none" {
		t.Errorf("with the cache off: X-Venn-Cache %q, want none", word)
	}

	rep = app.reload(t, y("{enabled: true, memory_bytes: 8388608}"))
	if !rep.Applied || len(rep.RestartRequired) != 0 {
		t.Fatalf("turning the cache on: %+v", rep)
	}
	if _, word := cachedCall(t, client, rpc, probeBlock); word != "miss" {
		t.Errorf("first call on the new cache: X-Venn-Cache %q, want miss (its memory starts empty)", word)
	}
	if _, word := cachedCall(t, client, rpc, probeBlock); word != "hit" {
		t.Errorf("second call on the new cache: X-Venn-Cache %q, want hit", word)
	}
}
