package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jsonscan"
)

// Bounds of the pending-transaction tests.
const (
	pendingSends  = 10               // transactions each test checks
	pendingSettle = 30 * time.Second // for every one to reach every subscriber
	// pendingWarmWait is how long a warm-up transaction is waited for
	// before the next is sent: a few of venn's polls of its pending
	// filter (remotes.DefaultPendingPollInterval).
	pendingWarmWait = 3 * time.Second
)

// devSender sends value transfers from geth --dev's account, counting the
// nonces itself: geth --dev mines each transaction at once, and a nonce
// read back from its pool in between can repeat one.
type devSender struct {
	g     *gethtest.Geth
	from  string
	nonce uint64
}

func newDevSender(t *testing.T, g *gethtest.Geth) *devSender {
	t.Helper()
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	if len(accounts) == 0 {
		t.Fatal("geth --dev has no dev account")
	}
	return &devSender{g: g, from: accounts[0]}
}

// send sends one transfer and returns its hash, lower case.
func (s *devSender) send(t *testing.T) string {
	t.Helper()
	var h string
	mustUnmarshal(t, s.g.MustCall(t, "eth_sendTransaction", map[string]any{
		"from": s.from, "to": "0x00000000000000000000000000000000000000aa", "value": "0x1",
		"nonce": fmt.Sprintf("0x%x", s.nonce),
	}), &h)
	s.nonce++
	return strings.ToLower(h)
}

// pendingKey is a newPendingTransactions result's hash: the result itself,
// or a transaction object's hash.
func pendingKey(res json.RawMessage) string {
	if len(res) > 0 && res[0] == '{' {
		res = jsonscan.Member(res, "hash")
	}
	var h string
	_ = json.Unmarshal(res, &h)
	return strings.ToLower(h)
}

// A first user's setup: venn at its default address (http://127.0.0.1:PORT,
// no chain path) in front of a node reached over HTTP only. JSON-RPC works
// at that URL, over HTTP and WebSocket, and newPendingTransactions, which
// needs a remote's WebSocket subscription otherwise, comes from venn's
// polled filter: every subscriber, hashes or full transactions, gets each
// transaction once.
func TestPendingTransactionsOverHTTPOnlyAtDefaultURL(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	dev := newDevSender(t, g)
	dev.send(t) // a first block, so that venn sees a head
	v := startVenn(t, []*gethtest.Geth{g}, vennOptions{httpOnly: true})

	if got, want := call(t, v.rootURL("http"), "eth_chainId"), g.MustCall(t, "eth_chainId"); string(got) != string(want) {
		t.Errorf("eth_chainId at %s = %s, want geth's %s", v.rootURL("http"), got, want)
	}
	subs := []struct {
		name  string
		notes *subNotes[json.RawMessage]
		full  bool
	}{
		{name: "hashes 1", notes: subRaw(t, subDial(t, v.rootURL("ws")), "hashes 1", "newPendingTransactions")},
		{name: "hashes 2", notes: subRaw(t, subDial(t, v.rootURL("ws")), "hashes 2", "newPendingTransactions")},
		{name: "full", notes: subRaw(t, subDial(t, v.rootURL("ws")), "full", "newPendingTransactions", true), full: true},
	}
	count := func(n *subNotes[json.RawMessage]) map[string]int {
		got, err := n.list()
		if err != nil {
			t.Fatalf("subscription ended: %v", err)
		}
		c := map[string]int{}
		for _, res := range got {
			c[pendingKey(res)]++
		}
		return c
	}

	// Warm up: send until every subscriber saw one of them (each filter is
	// polled from its first subscriber on, so the first sends may come
	// before it).
	warm := map[string]bool{}
	if !testkit.Poll(pendingSettle, func() bool {
		warm[dev.send(t)] = true
		for _, s := range subs {
			seen := false
			for h := range count(s.notes) {
				seen = seen || warm[h]
			}
			if !seen {
				time.Sleep(300 * time.Millisecond) // give the filter a poll before the next send
				return false
			}
		}
		return true
	}) {
		t.Fatalf("no pending transaction reached every subscriber within %v", pendingSettle)
	}

	var want []string
	for range pendingSends {
		want = append(want, dev.send(t))
	}
	for _, s := range subs {
		var c map[string]int
		if !testkit.Poll(pendingSettle, func() bool {
			c = count(s.notes)
			for _, h := range want {
				if c[h] == 0 {
					return false
				}
			}
			return true
		}) {
			t.Errorf("%s: got %d of %d transactions within %v", s.name, len(c), len(want), pendingSettle)
			continue
		}
		for _, h := range want {
			if c[h] != 1 {
				t.Errorf("%s: transaction %s came %d times, want once", s.name, h, c[h])
			}
			delete(c, h)
		}
		for h, n := range c {
			if !warm[h] || n > 1 {
				t.Errorf("%s: %s came %d times (sent in the warm-up: %v)", s.name, h, n, warm[h])
			}
		}
		if s.full {
			got, _ := s.notes.list()
			for _, res := range got {
				if len(res) == 0 || res[0] != '{' || !strings.Contains(string(res), `"from"`) {
					t.Errorf("%s: notification %s is not a transaction object", s.name, truncate(string(res)))
					break
				}
			}
		}
	}
}
