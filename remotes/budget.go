package remotes

import (
	"context"
	"time"

	"github.com/venn-gateway/venn/remotes/budget"
)

// Budgets (remotes/budget): each remote's Meter is billed for every call
// it is sent (remote.go, health.go) and read by selection (select.go);
// the pool's loop flushes its members' meters to PoolConfig.Budgets.

// bill counts one call of method sent to the remote (or, with
// budget.NotificationMethod, one notification received) in its budget.
func (r *Remote) bill(method string) { r.bud.Bill(method) }

// share is the remote's weight in its tier's draw, lower near its budget.
func (r *Remote) share() float64 { return r.bud.Share(r.weight) }

// overBudget reports a remote past its budget: used only when nothing
// else can take the call.
func (r *Remote) overBudget() bool { return r.bud.Over() }

// flushBudgets adds every budgeted member's counts to the store (or, with
// none, to its own total), then updates their gauges and logs.
func (p *Pool) flushBudgets(ctx context.Context, now time.Time) {
	var ms []*budget.Meter
	for _, r := range p.members() {
		if r.bud != nil {
			ms = append(ms, r.bud)
		}
	}
	if err := budget.Flush(ctx, p.conf().Budgets, p.conf().Chain, now, ms); err != nil {
		p.budgetErr(err)
	}
}

// budgetErr logs a failed flush, at most once a minute.
func (p *Pool) budgetErr(err error) {
	now := p.now().UnixNano()
	if last := p.budgetLogAt.Load(); now-last < int64(time.Minute) || !p.budgetLogAt.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn("budget counts not flushed; counting locally until the store answers", "err", err)
}
