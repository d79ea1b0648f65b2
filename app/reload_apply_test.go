package app

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/chain"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// chainNamed is the running chain name, or nil.
func (a *reloadApp) chainNamed(name string) *chain.Chain {
	for _, c := range a.reloader.chains.all() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// A chain whose pool cannot start is not listed: the report says the
// reload was partial and why, and the next reload adds it.
func TestReloadChainThatCannotStart(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	o := fakenode.Start(t, fakenode.Options{ChainID: 10, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a, o)
	y := reloadYAML("warn", []string{remoteYAML("a", a)}, "")
	app := startReloadApp(t, y)
	third := func(log string) string {
		return "  - name: third\n    chain_id: 10\n    misbehaviour_log: " + log + "\n    remotes:\n      - " +
			remoteYAML("o", o) + "\n"
	}
	rep := app.reload(t, y+third(filepath.Join(t.TempDir(), "missing", "dir", "mb.jsonl")))
	if rep.Applied || !rep.Partial || !strings.Contains(strings.Join(rep.Problems, "\n"), "chain third not added") {
		t.Fatalf("report %+v, want partial with the chain's problem", rep)
	}
	if app.chainNamed("third") != nil {
		t.Fatal("the chain that did not start is listed")
	}
	rep = app.reload(t, y+third(filepath.Join(t.TempDir(), "mb.jsonl")))
	if !rep.Applied || rep.Partial || !slices.Contains(rep.Changes, "chain third added") || app.chainNamed("third") == nil {
		t.Fatalf("second reload: %+v", rep)
	}
}

// A drained replica does not campaign for a chain a reload adds: it
// would take the leadership it just handed over.
func TestReloadAfterDrainDoesNotCampaign(t *testing.T) {
	_, token := testkit.Redis(t, func(token string) string { return "venn:{*" + token + "*}*" })
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	o := fakenode.Start(t, fakenode.Options{ChainID: 10, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a, o)
	first := "first-" + token
	y := reloadYAML("warn", []string{remoteYAML("a", a)}, "")
	y = strings.Replace(y, "name: test", "name: "+first, 1)
	y = "redis: {url: " + testRedisURL + ", replica_id: drain-" + token + "}\n" + y
	app := startReloadApp(t, y)
	app.reloader.chains.drain(context.Background())
	added := "added-" + token
	rep := app.reload(t, y+"  - name: "+added+"\n    chain_id: 10\n    remotes:\n      - "+remoteYAML("o", o)+"\n")
	c := app.chainNamed(added)
	if !rep.Applied || c == nil {
		t.Fatalf("report %+v", rep)
	}
	if c.Campaigns() {
		t.Error("the drained replica campaigns for the added chain")
	}
}

// The admin listener's settings take a restart and say so; a changed
// token list applies at once.
func TestReloadAdminSettings(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, a)
	y := reloadYAML("warn", []string{remoteYAML("a", a)}, "")
	tokens := func(tok string) string { return "admin: {tokens: [{name: ops, token: " + tok + "}]}\n" }
	first := "admin_listen: 127.0.0.1:0\n" + tokens(adminToken) + y
	app := startReloadApp(t, first)
	base := "http://" + app.admin.svc.bound.String()
	const rotated = "rotated-admin-token-0123456789"
	rep := app.reload(t, strings.Replace(tokens(rotated)+y, "metrics_listen: 127.0.0.1:0\n", "metrics_listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:1\n", 1))
	if !rep.Applied || !slices.Equal(rep.RestartRequired, []string{"admin_listen"}) {
		t.Fatalf("report %+v", rep)
	}
	if code, _ := testkit.AdminDo(t, "GET", base+"/admin/status", adminToken, ""); code != 401 {
		t.Errorf("the rotated-out token = %d, want 401", code)
	}
	if code, _ := testkit.AdminDo(t, "GET", base+"/admin/status", rotated, ""); code != 200 {
		t.Errorf("the new token = %d, want 200", code)
	}
	rep = app.reload(t, "admin: {on_metrics_listen: true}\n"+y)
	if !slices.Equal(rep.RestartRequired, []string{"admin_listen", "admin.on_metrics_listen", "admin.tokens (to or from none)"}) {
		t.Errorf("report %+v", rep)
	}
}
