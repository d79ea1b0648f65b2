package budget

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string // "" valid
	}{
		{"none", Config{}, ""},
		{"calls", Config{Calls: 10, Per: PeriodMonth}, ""},
		{"units", Config{Units: 10, Per: PeriodDay, Cost: map[string]uint64{"eth_getLogs": 75, "debug_trace*": 300}}, ""},
		{"no period", Config{Calls: 10}, "budget.per: required"},
		{"both", Config{Calls: 10, Units: 10, Per: PeriodDay}, "budget: set calls or units, not both"},
		{"cost with calls", Config{Calls: 10, Per: PeriodDay, Cost: map[string]uint64{"eth_call": 2}}, "budget.cost: prices compute units"},
		{"period alone", Config{Per: PeriodDay}, "budget: needs calls or units"},
		{"bad pattern", Config{Units: 10, Per: PeriodDay, Cost: map[string]uint64{"debug_*trace": 2}}, `budget.cost: "debug_*trace" is not a method`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.give.Validate(), tt.want)
		})
	}
}

func TestValidateWeight(t *testing.T) {
	tests := []struct {
		name string
		give *float64
		want string // "" valid
	}{
		{"absent", nil, ""},
		{"half", ptr(0.5), ""},
		{"zero", ptr(0.0), "weight: must be above 0"},
		{"huge", ptr(1e6), "weight: must be above 0 and at most 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, ValidateWeight(tt.give), tt.want)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// checkErr fails t unless err is nil where want is "", or contains want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestPeriodBounds(t *testing.T) {
	at := time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC)
	tests := []struct {
		give     Period
		wantEnd  time.Time
		wantName string
	}{
		{PeriodHour, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "h2026123123"},
		{PeriodDay, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "d20261231"},
		{PeriodMonth, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "m202612"},
	}
	for _, tt := range tests {
		_, end, name := tt.give.Bounds(at)
		if !end.Equal(tt.wantEnd) || name != tt.wantName {
			t.Errorf("%v: end %v name %s, want %v %s", tt.give, end, name, tt.wantEnd, tt.wantName)
		}
	}
}
