package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestAppRemoteSwitchesChain runs venn with a history store over two
// remotes, one of which switches to another chain after its start check
// and serves that chain's blocks. venn takes it out of rotation within the
// re-check period, serves none of its blocks from then on, writes none of
// them through to the store at any time, and takes the remote back once
// it is on the chain again. Before, the remote was checked once at start:
// it served the other chain's blocks for as long as venn ran, and they
// were written through.
func TestAppRemoteSwitchesChain(t *testing.T) {
	const recheck = 300 * time.Millisecond
	url := pgtest.Empty(t)
	good := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 1000})
	sw := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 1000})
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
postgres: {url: "`+url+`"}
chains:
  - name: test
    chain_id: 1337
    block_time: 50ms
    chain_recheck: `+recheck.String()+`
    head: {window: 16}
    history: {confirmations: 4}
    integrity: {stalker: false}
    remotes:
      - {name: sw, url: "`+sw.URL()+`"}
      - {name: good, url: "`+good.URL()+`"}
`)
	logs := &testkit.Buffer{}
	logged := func(s string) bool {
		return strings.Contains(logs.String(), s)
	}
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(logs), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	rpc := "http://" + s.rpc.bound.String() + "/test"
	metric := func(name string) string {
		_, body := get(t, client, "http://"+s.metrics.bound.String()+"/metrics")
		for line := range strings.SplitSeq(body, "\n") {
			if strings.HasPrefix(line, name+" ") {
				return strings.TrimPrefix(line, name+" ")
			}
		}
		return ""
	}
	blockHash := func(n uint64) string {
		t.Helper()
		r := post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["`+evm.Quantity(n)+`",false]}`)
		var b struct{ Hash string }
		if r.Error != nil || json.Unmarshal(r.Result, &b) != nil {
			t.Fatalf("block %d: %.200s %+v", n, r.Result, r.Error)
		}
		return b.Hash
	}
	testkit.WaitFor(t, 10*time.Second, "the history store to be ready", func() bool { return logged("history store ready") })
	store, err := blockstore.Open(context.Background(), url, blockstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	hist := store.Chain(1337, "test")

	// Settled blocks far below the window, fetched by clients, are
	// written through once both remotes report them.
	for n := uint64(100); n < 110; n++ {
		blockHash(n)
	}
	testkit.WaitFor(t, 10*time.Second, "blocks written through", func() bool {
		cov, err := hist.Covered(context.Background(), 100, 109)
		return err == nil && fmt.Sprint(cov) == "[{100 109}]"
	})

	sw.SwitchChain(5)
	switched := time.Now()
	wrong := `venn_remote_wrong_chain{chain="test",remote="sw"}`
	var foreign int // answers of the other chain before venn noticed
	for n := uint64(200); metric(wrong) != "1"; n++ {
		if time.Since(switched) > 10*recheck {
			t.Fatalf("the switched remote still in rotation %v after the switch (re-check every %v)", time.Since(switched), recheck)
		}
		if blockHash(n) != good.BlockHash(n) {
			foreign++
		}
	}
	t.Logf("out of rotation %v after the switch; %d answers of the other chain before", time.Since(switched).Round(time.Millisecond), foreign)
	if !logged("REMOTE SWITCHED TO ANOTHER CHAIN") {
		t.Error("the switch was not logged")
	}

	sw.ResetCalls()
	for n := uint64(400); n < 440; n++ {
		if got := blockHash(n); got != good.BlockHash(n) {
			t.Fatalf("block %d served as %s after the switched remote left rotation, want %s", n, got, good.BlockHash(n))
		}
	}
	if got := sw.TotalCalls() - sw.Calls("eth_chainId"); got != 0 {
		t.Errorf("the switched remote got %d calls after it left rotation: %v", got, sw.CallCounts())
	}

	// Every block the store holds is the chain's own: written through
	// before the switch, archived from the window, or refused.
	testkit.WaitFor(t, 10*time.Second, "the write-through queue to drain", func() bool {
		count := func(outcome string) int {
			var n int
			fmt.Sscan(metric(`venn_history_writethrough_total{chain="test",outcome="`+outcome+`"}`), &n)
			return n
		}
		done := 0
		for _, o := range []string{"stored", "orphan", "conflict", "failed", "foreign", "unlinked"} {
			done += count(o)
		}
		return done == count("queued")
	})
	var checked int
	for from := uint64(0); ; {
		refs, err := hist.Refs(context.Background(), from, 2000, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) == 0 {
			break
		}
		for _, r := range refs {
			if r.Hash != good.BlockHash(r.Number) {
				t.Errorf("stored block %d is the other chain's (%s)", r.Number, r.Hash)
			}
			checked++
		}
		from = refs[len(refs)-1].Number + 1
	}
	t.Logf("%d stored blocks, all the chain's own", checked)

	sw.SwitchChain(0)
	testkit.WaitFor(t, 10*time.Second, "the remote back in rotation", func() bool {
		return metric(wrong) == "0" && metric(`venn_remote_healthy{chain="test",remote="sw"}`) == "1"
	})
}
