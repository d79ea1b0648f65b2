package app

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// scrape reads /metrics of app's metrics listener: each series line (name
// and labels, as exposed) with its value.
func scrape(t *testing.T, app *reloadApp) map[string]string {
	t.Helper()
	status, body := get(t, http.DefaultClient, "http://"+app.servers.metrics.bound.String()+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		out[line[:i]] = line[i+1:]
	}
	return out
}

// families lists the metric names of the series that carry label.
func families(series map[string]string, label string) map[string]bool {
	out := map[string]bool{}
	for s := range series {
		if strings.Contains(s, label) {
			out[s[:strings.IndexAny(s, "{ ")]] = true
		}
	}
	return out
}

// The families every chain has from its start (or its first call), of
// every part that labels series by chain: none may stay once the chain
// is removed.
var chainFamilies = []string{
	"venn_answers_total",                      // router
	"venn_subscriptions",                      // subcenter
	"venn_stalker_head",                       // stalker
	"venn_leader",                             // stalker's election
	"venn_head_number",                        // headstore, scraped from the window
	"venn_head_feed_up",                       // headstore
	"venn_head_window_reloads_total",          // headstore
	"venn_cache_entries",                      // cache, scraped from the tiers
	"venn_cache_requests_total",               // cache
	"venn_auth_rejections_total",              // edge
	"venn_requests_total",                     // jrpc
	"venn_chain_head",                         // remotes, the chain's
	"venn_remote_healthy",                     // remotes, each remote's
	"venn_remote_call_duration_seconds_count", // remotes
}

// A reload that removes a chain and a remote deletes every series of
// them, in every part, once they have left; the kept chain's and
// remote's stay. The chain added again counts afresh.
func TestReloadDropsSeries(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	b := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	o := fakenode.Start(t, fakenode.Options{ChainID: 10, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a, b, o)
	other := "  - name: other\n    chain_id: 10\n    remotes:\n      - " + remoteYAML("o", o) + "\n"
	both := reloadYAML("warn", []string{remoteYAML("a", a), remoteYAML("b", b)}, other)
	app := startReloadApp(t, both)
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	balance := `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","0x1"]}`
	for _, chain := range []string{"test", "other"} {
		post(t, c, app.rpc(chain), `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
		post(t, c, app.rpc(chain), balance)
	}
	post(t, c, app.rpc("other"), `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
	missing := func(label string) []string {
		have := families(scrape(t, app), label)
		var out []string
		for _, f := range chainFamilies {
			if !have[f] {
				out = append(out, f)
			}
		}
		return out
	}
	testkit.WaitFor(t, 10*time.Second, "the series of both chains and of remote b", func() bool {
		return len(missing(`chain="test"`)) == 0 && len(missing(`chain="other"`)) == 0 &&
			families(scrape(t, app), `remote="b"`)["venn_remote_healthy"]
	})
	if got := scrape(t, app)[`venn_answers_total{chain="other",source="local"}`]; got != "2" {
		t.Fatalf("eth_chainId answered locally on other: %s, want 2", got)
	}

	if rep := app.reload(t, reloadYAML("warn", []string{remoteYAML("a", a)}, "")); !rep.Applied {
		t.Fatalf("report %+v", rep)
	}
	testkit.WaitFor(t, 10*time.Second, "the removed remote's and chain's series deleted", func() bool {
		s := scrape(t, app)
		return len(families(s, `chain="other"`)) == 0 && len(families(s, `remote="b"`)) == 0
	})
	// Waited for once gone: nothing the removed ones left running writes
	// them again.
	app.reloader.chains.retired.Wait()
	s := scrape(t, app)
	if f := families(s, `chain="other"`); len(f) != 0 {
		t.Errorf("series of the removed chain written again: %v", f)
	}
	if f := families(s, `remote="b"`); len(f) != 0 {
		t.Errorf("series of the removed remote written again: %v", f)
	}
	if m := missing(`chain="test"`); len(m) != 0 {
		t.Errorf("the kept chain's series went too: %v", m)
	}
	if !families(s, `remote="a"`)["venn_remote_healthy"] {
		t.Error("the kept remote's series went too")
	}

	if rep := app.reload(t, both); !rep.Applied {
		t.Fatalf("report %+v", rep)
	}
	post(t, c, app.rpc("other"), `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
	testkit.WaitFor(t, 10*time.Second, "the series of the chain added again", func() bool {
		m := missing(`chain="other"`)
		// No cacheable call was made on it yet.
		return len(m) == 1 && m[0] == "venn_cache_requests_total"
	})
	if got := scrape(t, app)[`venn_answers_total{chain="other",source="local"}`]; got != "1" {
		t.Errorf("eth_chainId answered locally on the chain added again: %s, want 1 (counted afresh)", got)
	}
}

// A chain whose chain id changed is removed and added again in one
// reload: the one removed, once it has stopped, deletes no series the one
// added writes.
func TestReloadChainIDKeepsSeries(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	o := fakenode.Start(t, fakenode.Options{ChainID: 10, BlockTime: headsBlockTime})
	o2 := fakenode.Start(t, fakenode.Options{ChainID: 11, BlockTime: headsBlockTime})
	// o2 far ahead of o, so that a head from o2 cannot be one of o's.
	const o2Ahead = 1000
	o2.Mine(o2Ahead)
	fakenode.MineEvery(t, headsBlockTime, a, o, o2)
	other := func(id string, n *fakenode.Node) string {
		return "  - name: other\n    chain_id: " + id + "\n    remotes:\n      - " + remoteYAML("o", n) + "\n"
	}
	app := startReloadApp(t, reloadYAML("warn", []string{remoteYAML("a", a)}, other("10", o)))
	has := func(s map[string]string) []string {
		have := families(s, `chain="other"`)
		var out []string
		for _, f := range []string{"venn_answers_total", "venn_subscriptions", "venn_stalker_head", "venn_leader",
			"venn_head_feed_up", "venn_cache_entries", "venn_chain_head", "venn_remote_healthy"} {
			if !have[f] {
				out = append(out, f)
			}
		}
		return out
	}
	testkit.WaitFor(t, 10*time.Second, "the series of chain other", func() bool { return len(has(scrape(t, app))) == 0 })

	if rep := app.reload(t, reloadYAML("warn", []string{remoteYAML("a", a)}, other("11", o2))); !rep.Applied {
		t.Fatalf("report %+v", rep)
	}
	app.reloader.chains.retired.Wait()
	if m := has(scrape(t, app)); len(m) != 0 {
		t.Errorf("the chain added again lost its series when the one removed stopped: %v", m)
	}
	testkit.WaitFor(t, 10*time.Second, "the new chain's head number", func() bool {
		// o2's head, not o's: the window scraped is the new chain's.
		// (Not compared with venn_chain_head: a block every 200ms moves
		// one between the two, and on a busy machine they rarely agree.)
		h, err := strconv.ParseUint(scrape(t, app)[`venn_head_number{chain="other"}`], 10, 64)
		return err == nil && h >= o2Ahead
	})
}
