package cache

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test stops what it starts: pools, clients, servers, Run loops.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
