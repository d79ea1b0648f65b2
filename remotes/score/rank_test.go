package score

import "testing"

func TestRank(t *testing.T) {
	tests := []struct {
		name     string
		give     []Entry
		margin   float64
		wantBest float64
		want     []bool // preferred after
	}{
		{name: "within margin joins, past it does not",
			give:   []Entry{{Latency: 10, Known: true, Penalty: 1, InRotation: true}, {Latency: 12, Known: true, Penalty: 1, InRotation: true}, {Latency: 13, Known: true, Penalty: 1, InRotation: true}},
			margin: 0.25, wantBest: 10, want: []bool{true, true, false}},
		{name: "a preferred one stays until twice the margin",
			give:   []Entry{{Latency: 10, Known: true, Penalty: 1, InRotation: true}, {Latency: 14, Known: true, Penalty: 1, InRotation: true, Preferred: true}, {Latency: 16, Known: true, Penalty: 1, InRotation: true, Preferred: true}},
			margin: 0.25, wantBest: 10, want: []bool{true, true, false}},
		{name: "unknown latency counts as the best, penalties still count",
			give:   []Entry{{Latency: 10, Known: true, Penalty: 1, InRotation: true}, {Penalty: 2, InRotation: true}},
			margin: 0.25, wantBest: 10, want: []bool{true, false}},
		{name: "the best is among those in rotation",
			give:   []Entry{{Latency: 1, Known: true, Penalty: 1}, {Latency: 10, Known: true, Penalty: 1, InRotation: true}},
			margin: 0.25, wantBest: 10, want: []bool{true, true}},
		{name: "none in rotation: the best of all",
			give:   []Entry{{Latency: 1, Known: true, Penalty: 1}, {Latency: 10, Known: true, Penalty: 1}},
			margin: 0.25, wantBest: 1, want: []bool{true, false}},
		{name: "other groups untouched",
			give:   []Entry{{Latency: 10, Known: true, Penalty: 1, InRotation: true}, {Group: 1, Latency: 99, Known: true, Penalty: 1, Preferred: true}},
			margin: 0.25, wantBest: 10, want: []bool{true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if best := Rank(tt.give, 0, tt.margin); best != tt.wantBest {
				t.Errorf("best = %v, want %v", best, tt.wantBest)
			}
			for i, e := range tt.give {
				if e.Preferred != tt.want[i] {
					t.Errorf("entry %d (score %v) preferred = %v, want %v", i, e.Score, e.Preferred, tt.want[i])
				}
			}
		})
	}
}
