package budget

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/venn-gateway/venn/remotes/fielderr"
	"github.com/venn-gateway/venn/remotes/wire"
)

// Weights and budgets: how much of its tier's traffic a remote is given
// (weight), and how much it may be sent in a billing period (budget),
// counted in calls or in the compute units a provider bills per method
// (cost). meter.go keeps the counts; the pool's selection reads both.

// MaxWeight bounds a remote's weight.
const MaxWeight = 1000

// Period is a budget's billing period, in UTC: the counts start again at
// the top of each hour, at midnight, or on the first of the month.
type Period uint8

const (
	PeriodNone Period = iota
	PeriodHour
	PeriodDay
	PeriodMonth
)

func (p Period) String() string {
	switch p {
	case PeriodHour:
		return "hour"
	case PeriodDay:
		return "day"
	case PeriodMonth:
		return "month"
	}
	return ""
}

// MarshalText writes the period as config names it.
func (p Period) MarshalText() ([]byte, error) {
	if p > PeriodMonth {
		return nil, fmt.Errorf("unknown period %d", p)
	}
	return []byte(p.String()), nil
}

// UnmarshalText reads hour, day or month; "" (null) is none.
func (p *Period) UnmarshalText(b []byte) error {
	switch string(b) {
	case "":
		*p = PeriodNone
	case "hour":
		*p = PeriodHour
	case "day":
		*p = PeriodDay
	case "month":
		*p = PeriodMonth
	default:
		return fmt.Errorf("unknown period %q (want hour, day or month)", b)
	}
	return nil
}

// Bounds are the start and end of the period holding t, and its name in
// a counter's key (h2026120123, d20261201, m202612).
func (p Period) Bounds(t time.Time) (start, end time.Time, name string) {
	t = t.UTC()
	y, m, d := t.Date()
	switch p {
	case PeriodHour:
		start = time.Date(y, m, d, t.Hour(), 0, 0, 0, time.UTC)
		return start, start.Add(time.Hour), start.Format("h2006010215")
	case PeriodDay:
		start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1), start.Format("d20060102")
	}
	start = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 1, 0), start.Format("m200601")
}

// Config is what a remote may be sent per period: Calls calls, or Units
// compute units with each call priced by Cost. Zero is no budget.
type Config struct {
	Calls uint64 `yaml:"calls"`
	Units uint64 `yaml:"units"`
	Per   Period `yaml:"per"`
	// Cost prices each method in units: a method name, a prefix ending in
	// "*" (debug_trace*), or "default" for the rest (1 when absent). The
	// longest matching prefix wins. eth_subscription prices each
	// subscription notification received (absent: free). Only with Units.
	Cost map[string]uint64 `yaml:"cost"`
}

// Set reports whether a budget is configured.
func (b Config) Set() bool { return b.Calls > 0 || b.Units > 0 }

// limit is the budget per period, in calls or units.
func (b Config) limit() uint64 { return max(b.Calls, b.Units) }

// costDefault is the Cost key for the methods no other entry names.
const costDefault = "default"

// NotificationMethod is the Cost key pricing one subscription
// notification received (the method a notification carries). Only an
// entry of exactly this name prices it, never a prefix or default:
// absent, notifications are free.
const NotificationMethod = wire.NotificationMethod

// Validate reports the budget's problems, each naming its field as a
// remote's section spells it (budget.per).
func (b Config) Validate() error {
	var p fielderr.List
	add := p.Add
	switch {
	case b.Calls > 0 && b.Units > 0:
		add("budget", "set calls or units, not both")
	case !b.Set() && (b.Per != PeriodNone || len(b.Cost) > 0):
		add("budget", "needs calls or units per period")
	case b.Set() && b.Per == PeriodNone:
		add("budget.per", "required: hour, day or month")
	}
	if b.Per > PeriodMonth {
		add("budget.per", "unknown period %d", b.Per)
	}
	if len(b.Cost) > 0 && b.Units == 0 {
		add("budget.cost", "prices compute units: set budget.units, not budget.calls")
	}
	for _, k := range slices.Sorted(maps.Keys(b.Cost)) {
		if bad := strings.TrimSuffix(k, "*"); k == "" || k == "*" || strings.ContainsAny(bad, "* \t\r\n") {
			add("budget.cost", "%q is not a method, a prefix ending in *, or default", k)
		}
	}
	return p.Err()
}

// costTable is a Config's Cost compiled for the hot path: one map lookup
// for a method named exactly, else the prefixes, longest first.
type costTable struct {
	def      uint64
	exact    map[string]uint64
	prefixes []prefixCost // longest first
}

type prefixCost struct {
	prefix string
	units  uint64
}

func compileCost(cost map[string]uint64) costTable {
	t := costTable{def: 1, exact: make(map[string]uint64, len(cost))}
	for k, v := range cost {
		switch {
		case k == costDefault:
			t.def = v
		case strings.HasSuffix(k, "*"):
			t.prefixes = append(t.prefixes, prefixCost{strings.TrimSuffix(k, "*"), v})
		default:
			t.exact[k] = v
		}
	}
	slices.SortFunc(t.prefixes, func(a, b prefixCost) int { return len(b.prefix) - len(a.prefix) })
	return t
}

// of is the units one call of method costs.
func (t *costTable) of(method string) uint64 {
	if v, ok := t.exact[method]; ok {
		return v
	}
	for _, pc := range t.prefixes {
		if strings.HasPrefix(method, pc.prefix) {
			return pc.units
		}
	}
	return t.def
}

// Weight is a configured weight, 1 when absent.
func Weight(w *float64) float64 {
	if w == nil {
		return 1
	}
	return *w
}

// ValidateWeight reports a weight outside (0, MaxWeight].
func ValidateWeight(w *float64) error {
	if w != nil && !(*w > 0 && *w <= MaxWeight) { // NaN too
		return fmt.Errorf("weight: must be above 0 and at most %d", MaxWeight)
	}
	return nil
}
