package remotes

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Functions only the tests call.

// LastGoodCheck is the time of r's last good check (zero: none yet).
func (r *Remote) LastGoodCheck() time.Time {
	if g := r.goodAt.Load(); g != 0 {
		return time.Unix(0, g)
	}
	return time.Time{}
}

// Members is the pool's remotes, by tier.
func (p *Pool) Members() []*Remote { return p.members() }

// FlushBudgets flushes the budget counts as of now.
func (p *Pool) FlushBudgets(ctx context.Context, now time.Time) { p.flushBudgets(ctx, now) }

// Bill counts one call of method against r's budget.
func (r *Remote) Bill(method string) { r.bill(method) }

// BudgetUsed is the share of r's budget used.
func (r *Remote) BudgetUsed() float64 { return r.budgetUsed() }

// OverBudget reports whether r is past its budget.
func (r *Remote) OverBudget() bool { return r.overBudget() }

// Share is r's share of its tier's calls.
func (r *Remote) Share() float64 { return r.share() }

// Bounds is the period that holds t: its start, end and name.
func (p Period) Bounds(t time.Time) (start, end time.Time, name string) { return p.bounds(t) }

// BudgetUsedGauge is venn_remote_budget_used_ratio of a remote.
func (m *Metrics) BudgetUsedGauge(chain, remote string) prometheus.Gauge {
	return m.bm.used.WithLabelValues(chain, remote)
}
