package blockstore

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops what it starts: the store's probe and pool, the geth
// processes, the proxies.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
