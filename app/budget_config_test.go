package app

import (
	"strings"
	"testing"
)

func TestBudgetAndLogLimitsConfig(t *testing.T) {
	c := mustParse(t, `
chains:
  - name: ethereum
    chain_id: 1
    getlogs_limits: {max_block_range: 5000, max_addresses: 100}
    remotes:
      - name: cheap
        url: http://127.0.0.1:18545
        weight: 4
        budget: {units: 300000000, per: month, cost: {default: 1, eth_getLogs: 75, "debug_trace*": 300}}
      - name: dear
        url: http://127.0.0.1:18546
        budget: {calls: 1000, per: day}
`)
	ch := c.Chains[0]
	if l := ch.GetLogsLimits; l.MaxBlockRange != 5000 || l.MaxAddresses != 100 || l.MaxTopics != 1000 {
		t.Fatalf("getlogs_limits read as %+v", l)
	}
	cheap, dear := ch.Remotes[0], ch.Remotes[1]
	if *cheap.Weight != 4 || cheap.Budget.Cost["debug_trace*"] != 300 || dear.Budget.Calls != 1000 || dear.Weight != nil {
		t.Fatalf("remotes read as %+v and %+v", cheap, dear)
	}

	_, err := Parse([]byte(`
chains:
  - name: ethereum
    chain_id: 1
    getlogs_limits: {max_addresses: 5000}
    remotes:
      - name: a
        url: http://127.0.0.1:18545
        weight: -1
        budget: {calls: 10, cost: {eth_call: 2}}
`))
	for _, want := range []string{
		"chains[0].getlogs_limits.max_addresses: must be 1 to 1000",
		"chains[0].remotes[0].weight: must be above 0",
		"chains[0].remotes[0].budget.per: required",
		"chains[0].remotes[0].budget.cost: prices compute units",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in:\n%v", want, err)
		}
	}
	if _, err := Parse([]byte(strings.Replace(minimal, "url:", "budget: {calls: 5, per: week}\n        url:", 1))); err == nil ||
		!strings.Contains(err.Error(), "budget.per") || !strings.Contains(err.Error(), "hour, day or month") {
		t.Errorf("an unknown period: %v", err)
	}
}
