package wire

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitFor polls cond until it holds, failing t after 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, what, cond)
}
