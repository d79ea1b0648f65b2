package heads

import (
	"testing"
	"time"
)

func TestPlausible(t *testing.T) {
	ref := &Report{Number: 100, Time: 1200}
	tests := []struct {
		name string
		give Report
		bt   time.Duration
		want bool
	}{
		{"next block", Report{Number: 101, Time: 1212}, 12 * time.Second, true},
		{"slack, same time", Report{Number: 102, Time: 1200}, 12 * time.Second, true},
		{"beyond slack, same time", Report{Number: 103, Time: 1200}, 12 * time.Second, false},
		{"an hour later", Report{Number: 400, Time: 1200 + 3600}, 12 * time.Second, true},
		{"twice the pace", Report{Number: 100 + 2 + 2*300, Time: 1200 + 3600 - 1}, 12 * time.Second, true},
		{"beyond twice the pace", Report{Number: 100 + 3 + 2*300, Time: 1200 + 3600 - 1}, 12 * time.Second, false},
		{"sub-second blocks, same second", Report{Number: 110, Time: 1200}, 100 * time.Millisecond, true},
		{"older timestamp", Report{Number: 110, Time: 1100}, time.Second, false},
		{"a billion blocks", Report{Number: 1_000_000_000, Time: 1212}, 12 * time.Second, false},
		{"a lower head", Report{Number: 50, Time: 600}, 12 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Plausible(&tt.give, ref, tt.bt); got != tt.want {
				t.Errorf("Plausible(%d@%d after 100@1200, %v) = %v, want %v", tt.give.Number, tt.give.Time, tt.bt, got, tt.want)
			}
		})
	}
}

func TestBlockClock(t *testing.T) {
	type s = sample
	tests := []struct {
		name        string
		below       []s // added with below, after the tips
		tips        []s
		want        time.Duration
		wantFastest time.Duration // 0: want
		wantOK      bool
	}{
		{name: "nothing", wantOK: false},
		{name: "one head", tips: []s{{100, 1200}}, wantOK: false},
		{name: "12 s blocks", tips: []s{{100, 1200}, {101, 1212}, {102, 1224}}, want: 12 * time.Second, wantOK: true},
		{name: "bootstrap below", below: []s{{36, 432}}, tips: []s{{100, 1200}}, want: 12 * time.Second, wantOK: true},
		{name: "sub-second blocks", tips: []s{{0, 0}, {5, 0}, {10, 1}, {15, 1}, {20, 2}, {25, 2}, {30, 3}, {35, 3}, {40, 4}},
			want: 100 * time.Millisecond, wantOK: true},
		{name: "one halt", tips: []s{{1, 1}, {2, 2}, {3, 3}, {4, 3600}, {5, 3601}, {6, 3602}, {7, 3603}, {8, 3604}},
			want: time.Second, wantOK: true},
		{name: "bursts", tips: []s{{1, 0}, {2, 2}, {3, 4}, {23, 6}, {24, 8}, {25, 10}},
			want: 2 * time.Second, wantFastest: 100 * time.Millisecond, wantOK: true},
		{name: "a tip below drops what is above", tips: []s{{100, 1200}, {101, 1212}, {102, 1224}, {90, 1080}, {91, 1081}, {92, 1082}},
			want: time.Second, wantOK: true},
		{name: "a sibling with another timestamp", tips: []s{{100, 1200}, {101, 1212}, {101, 1213}}, want: 13 * time.Second, wantOK: true},
		{name: "floored", tips: []s{{0, 0}, {1000, 2}}, want: MinBlockTime, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Clock
			for _, x := range tt.tips {
				c.Tip(x.number, x.time)
			}
			for _, x := range tt.below {
				c.Below(x.number, x.time)
			}
			got, fastest, ok := c.Estimate()
			wantFastest := tt.wantFastest
			if wantFastest == 0 {
				wantFastest = tt.want
			}
			if ok != tt.wantOK || ok && (got != tt.want || fastest > wantFastest) {
				t.Errorf("estimate = %v (fastest %v), %v; want %v (fastest %v), %v (samples %v)",
					got, fastest, ok, tt.want, wantFastest, tt.wantOK, c.samples)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		var c Clock
		for i := range uint64(10 * clockSamples) {
			c.Tip(i, 12*i)
		}
		if len(c.samples) != clockSamples {
			t.Errorf("%d samples kept, want %d", len(c.samples), clockSamples)
		}
	})
}
