package app

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// remoteSeries counts the remotes' and the wire's series (venn_remote_*,
// venn_chain_head, venn_requests_total, ...) with label name=value.
func remoteSeries(t *testing.T, app *reloadApp, name, value string) int {
	t.Helper()
	mfs, err := app.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "venn_remote_") && mf.GetName() != "venn_chain_head" &&
			mf.GetName() != "venn_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == name && l.GetValue() == value {
					n++
				}
			}
		}
	}
	return n
}

// A reload that removes a remote and a chain deletes their series once
// they have left, so dashboards and alerts see no ghosts.
func TestReloadDropsSeries(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	b := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	o := fakenode.Start(t, fakenode.Options{ChainID: 10, BlockTime: headsBlockTime})
	mineAll(t, headsBlockTime, a, b, o)
	other := "  - name: other\n    chain_id: 10\n    remotes:\n      - " + remoteYAML("o", o) + "\n"
	app := startReloadApp(t, reloadYAML("warn", []string{remoteYAML("a", a), remoteYAML("b", b)}, other))
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	post(t, c, app.rpc("other"), `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
	testkit.WaitFor(t, 10*time.Second, "series of remote b and chain other", func() bool {
		return remoteSeries(t, app, "remote", "b") > 0 && remoteSeries(t, app, "chain", "other") > 0
	})

	if rep := app.reload(t, reloadYAML("warn", []string{remoteYAML("a", a)}, "")); !rep.Applied {
		t.Fatalf("report %+v", rep)
	}
	testkit.WaitFor(t, 10*time.Second, "the removed remote's and chain's series deleted", func() bool {
		return remoteSeries(t, app, "remote", "b") == 0 && remoteSeries(t, app, "chain", "other") == 0
	})
	if remoteSeries(t, app, "remote", "a") == 0 {
		t.Error("the kept remote's series went too")
	}
}
