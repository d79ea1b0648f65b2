//go:build linux

package cluster

import (
	"fmt"
	"os"
	"strings"
	"testing"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/testkit"
)

// budgetUnits is n0's daily budget: one unit an eth_getBalance, nothing
// for the rest, so head tracking and the leader's fetches do not spend it.
const budgetUnits = 40

// Two replicas share n0's budget through Redis: what one spends, the
// other sees after a flush. n0 takes nearly every call while it has
// budget (weight 1000 against n1's 1); once the cluster has spent it,
// every call goes to n1, and both replicas say so in the metric and the
// log.
func TestBudgetExhaustsAcrossTheCluster(t *testing.T) {
	c := startClusterWith(t, 2, func(conf *harness.Config) {
		conf.Remotes[0].Extra = fmt.Sprintf(`weight: 1000, budget: {units: %d, per: day, cost: {default: 0, eth_getBalance: 1}}`, budgetUnits)
		// Weights share calls among a tier's preferred remotes: latency
		// left out of the scores keeps both in that set, however a loaded
		// machine slows the one taking the calls.
		conf.ChainExtra += "scoring: {latency: 0}\n"
	})
	c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)
	cheap, other := c.nodes[0], c.nodes[1]
	r0, r1 := c.replicas[0], c.replicas[1]
	balance := func(r *replica, i int) {
		t.Helper()
		var out string
		if err := rpc(r, "eth_getBalance", &out, fmt.Sprintf("0x%040x", i+1), "latest"); err != nil {
			t.Fatalf("replica %s: %v", r.id, err)
		}
	}

	// Three quarters of the budget, spent on r0.
	for i := range 30 {
		balance(r0, i)
	}
	label := `remote="n0"`
	if !testkit.Poll(waitLimit, func() bool {
		u, ok := metric(r1, "venn_remote_budget_used_ratio", label)
		return ok && u >= 0.7
	}) {
		u, _ := metric(r1, "venn_remote_budget_used_ratio", label)
		t.Fatalf("replica r1 sees n0's budget %v used; r0 spent %d of %d", u, cheap.Calls("eth_getBalance"), budgetUnits)
	}
	// r1 spends the rest, then moves to n1.
	for i := 30; i < 60; i++ {
		balance(r1, i)
	}
	if got := cheap.Calls("eth_getBalance"); got != budgetUnits {
		t.Errorf("n0 got %d eth_getBalance calls across the cluster, want its budget of %d", got, budgetUnits)
	}
	if got := other.Calls("eth_getBalance"); got != 60-budgetUnits {
		t.Errorf("n1 got %d eth_getBalance calls, want the %d past n0's budget", got, 60-budgetUnits)
	}
	for k, r := range c.replicas {
		if !testkit.Poll(waitLimit, func() bool {
			u, ok := metric(r, "venn_remote_budget_used_ratio", label)
			return ok && u >= 1
		}) {
			t.Errorf("replica %s never saw n0's budget used", r.id)
		}
		// And r0 too moves its calls to n1.
		before := other.Calls("eth_getBalance")
		balance(r, 100+k) // another account: the cache would answer the same one

		if other.Calls("eth_getBalance") != before+1 {
			t.Errorf("replica %s sent a call to n0 past its budget", r.id)
		}
		if !testkit.Poll(waitLimit, func() bool {
			b, _ := os.ReadFile(r.logPath)
			return strings.Contains(string(b), "remote budget used")
		}) {
			t.Errorf("replica %s did not log n0's budget used", r.id)
		}
	}
}
