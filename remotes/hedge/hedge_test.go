package hedge

import (
	"testing"
	"time"
)

type fixed struct {
	d  time.Duration
	ok bool
}

func (f fixed) Quantile(float64) (time.Duration, bool) { return f.d, f.ok }

func TestDelay(t *testing.T) {
	tests := []struct {
		name     string
		delay    time.Duration
		quantile float64
		lat      fixed
		want     time.Duration
		wantOK   bool
	}{
		{name: "fixed delay", delay: 10 * time.Millisecond, lat: fixed{time.Second, true}, want: 10 * time.Millisecond, wantOK: true},
		{name: "quantile", delay: time.Millisecond, quantile: 0.9, lat: fixed{40 * time.Millisecond, true}, want: 40 * time.Millisecond, wantOK: true},
		{name: "quantile never below the delay", delay: 50 * time.Millisecond, quantile: 0.9, lat: fixed{40 * time.Millisecond, true}, want: 50 * time.Millisecond, wantOK: true},
		{name: "not measured: the delay", delay: 5 * time.Millisecond, quantile: 0.9, want: 5 * time.Millisecond, wantOK: true},
		{name: "not measured, no delay: no hedge", quantile: 0.9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Delay(tt.delay, tt.quantile, tt.lat)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Delay = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// A budget of a tenth with a burst of 2: two hedges at once, then one per
// ten hedgeable calls, a refund giving one back.
func TestBudget(t *testing.T) {
	b := NewBudget(0.1, 2)
	if !b.Take() || !b.Take() || b.Take() {
		t.Fatal("a full budget of burst 2 did not give exactly 2 hedges")
	}
	for range 9 {
		b.Deposit()
	}
	if b.Take() {
		t.Fatal("a hedge after 9 calls at a share of 0.1")
	}
	b.Deposit()
	if !b.Take() {
		t.Fatal("no hedge after 10 calls at a share of 0.1")
	}
	b.Refund()
	if !b.Take() {
		t.Fatal("a refunded hedge was not given back")
	}
	for range 100 {
		b.Deposit()
	}
	if !b.Take() || !b.Take() || b.Take() {
		t.Fatal("the budget held more than its burst")
	}
}
