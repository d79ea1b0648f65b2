package budget

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// testMeter is b's meter for a remote named paid, its gauge unregistered.
func testMeter(b Config) *Meter {
	return New(b, "paid", prometheus.NewGauge(prometheus.GaugeOpts{Name: "used"}), slog.New(slog.DiscardHandler))
}

// flush flushes ms without a store: the counts are this process's own.
func flush(t *testing.T, now time.Time, ms ...*Meter) {
	t.Helper()
	if err := Flush(context.Background(), nil, "local", now, ms); err != nil {
		t.Fatal(err)
	}
}

func TestBudgetWithoutStoreCountsLocally(t *testing.T) {
	m := testMeter(Config{Units: 1000, Per: PeriodHour,
		Cost: map[string]uint64{"default": 1, "eth_getLogs": 75, "debug_trace*": 300, "debug_traceBlockByHash": 500}})
	for _, method := range []string{"eth_getLogs", "debug_traceTransaction", "debug_traceBlockByHash", "eth_chainId"} {
		m.Bill(method)
	}
	now := time.Now()
	flush(t, now, m)
	flush(t, now, m)
	if got := m.Used(); got != 0.876 {
		t.Fatalf("used %v, want (75+300+500+1)/1000", got)
	}
}

// A notification costs only in a units budget, at exactly its cost
// table's eth_subscription entry: never the default, never a call.
func TestBudgetNotificationPrice(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want float64 // used after one notification
	}{
		{"calls", Config{Calls: 100, Per: PeriodDay}, 0},
		{"units priced", Config{Units: 100, Per: PeriodDay, Cost: map[string]uint64{"default": 5, "eth_subscription": 40}}, 0.4},
		{"units unpriced", Config{Units: 100, Per: PeriodDay, Cost: map[string]uint64{"default": 5, "eth_*": 7}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := testMeter(tt.give)
			m.Bill(NotificationMethod)
			if got := m.Used(); got != tt.want {
				t.Fatalf("one notification used %v, want %v", got, tt.want)
			}
		})
	}
}
