package remotes

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/remotes/budget"
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

// Meter is r's budget meter (nil: no budget).
func (r *Remote) Meter() *budget.Meter { return r.bud }

// BudgetUsedGauge is venn_remote_budget_used_ratio of a remote.
func (m *Metrics) BudgetUsedGauge(chain, remote string) prometheus.Gauge {
	return m.bm.Used(chain, remote)
}
