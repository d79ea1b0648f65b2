package blockstore

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/evm"
)

// Every test stops what it starts: the store's probe and pool, the geth
// processes, the proxies.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// parseFilter reads an eth_getLogs filter object as the router does.
func parseFilter(t testing.TB, raw string) *evm.LogFilter {
	t.Helper()
	var f evm.LogFilter
	if !f.Parse([]byte(raw)) {
		t.Fatalf("filter %s does not parse", raw)
	}
	return &f
}
