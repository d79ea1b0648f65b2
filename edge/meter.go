package edge

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/jrpc"
)

// A UsageSink keeps what each tenant's calls cost, for billing (package
// usage, in Postgres). Series resolves a tenant's calls of one method on
// one chain once (the edge keeps what it returns, per tenant, chain and
// known method); the function it returns adds calls answered at now and
// must not block: it is on every answer's path. method is bounded (a
// known method, or "other"); tenant is a tenant's name, or an API key's
// without one.
type UsageSink interface {
	Series(tenant, chain, method string) func(now time.Time, calls, credits, errors, bytesOut int64)
}

var _ jrpc.Meter = (*client)(nil)

// Charge implements jrpc.Meter: it prices the answered calls, spends the
// credits from the tenant's budgets, hands them to usage, and over HTTP
// says in one header what the request cost and what is left. Callers with
// neither key nor tenant are not metered. It reads the clock once, for
// the budgets and usage both.
func (cl *client) Charge(_ context.Context, chain string, calls []jrpc.Charged, h *jrpc.AnswerHeader) {
	e := cl.e
	var ms *meterSlots
	switch {
	case cl.tenant != nil:
		ms = &cl.tenant.meter
	case cl.key != nil:
		ms = &cl.key.meter
	default:
		return
	}
	t := cl.tenant
	budgeted := t != nil && t.budget.Limited()
	var now time.Time
	if e.usage != nil || budgeted {
		now = e.budgets.now()
	}
	var total int64
	for _, c := range calls {
		var errs int64
		if c.Code != 0 {
			errs = 1
		}
		sl := ms.slot(e, chain, c.Method)
		var credits int64
		switch {
		case c.Source == "" || gatewayFault(c.Code):
		case sl.method == c.Method:
			credits = sl.cost(c.Source)
		default: // counted under its label, priced by its name
			credits = e.pricing.cost(c.Method, c.Source)
		}
		total += credits
		if sl.usage != nil {
			sl.usage(now, 1, credits, errs, int64(c.BytesOut))
		}
	}
	if t == nil {
		setCredits(h, total, noBudget)
		return
	}
	if t.credits != nil {
		t.credits.Add(float64(total))
	}
	if !budgeted {
		setCredits(h, total, noBudget)
		return
	}
	setCredits(h, total, e.budgets.spend(t.account, total, t.budget, now))
}

// meterSlots are what a tenant's (or a tenant-less key's) calls of each
// method on each chain are priced at and counted in, resolved on the
// first such call: a call then compares two names with the slot of the
// call before, or looks up one map read without a lock, rather than the
// price table and usage's series under its lock. Only methods that are
// their own label (known ones) are kept, so the map is bounded by the
// configuration; others are resolved on every call. A reload compiles new
// tenants and keys, and so new slots.
type meterSlots struct {
	account string // the tenant's name, or the key's
	// last is the slot found last: a client calls the same method on the
	// same chain again more often than not.
	last  atomic.Pointer[meterSlot]
	mu    sync.Mutex
	slots atomic.Pointer[map[slotKey]*meterSlot] // copied on write
}

type slotKey struct{ chain, method string }

// meterSlot is one method's price on one chain, by the part that answers
// it, and its usage series.
type meterSlot struct {
	slotKey
	base  int64                                       // answered by a source pricing does not name
	bySrc [numSources]int64                           // by sourceIndex
	usage func(time.Time, int64, int64, int64, int64) // nil: no usage kept
}

// cost is what one call answered by source costs.
func (sl *meterSlot) cost(source string) int64 {
	if i, ok := sourceIndex(source); ok {
		return sl.bySrc[i]
	}
	return sl.base
}

// slot returns the slot of method on chain for the account ms belongs to.
// A method that is not its own label (unbounded: a name no table or
// registry knows) gets its label's slot, whose prices are not its own:
// Charge prices it apart.
func (ms *meterSlots) slot(e *Edge, chain, method string) *meterSlot {
	if sl := ms.last.Load(); sl != nil && sl.method == method && sl.chain == chain {
		return sl
	}
	k := slotKey{chain: chain, method: method}
	if sl := ms.find(k); sl != nil {
		return sl
	}
	base, label := e.pricing.price(method)
	if label != method {
		k.method = label
		if sl := ms.find(k); sl != nil {
			return sl
		}
		base, _ = e.pricing.price(label)
	}
	sl := &meterSlot{slotKey: k, base: base}
	for i := range sl.bySrc {
		sl.bySrc[i] = e.pricing.factored(base, i)
	}
	if e.usage != nil {
		sl.usage = e.usage.Series(ms.account, chain, k.method)
	}
	return ms.keep(sl)
}

// find returns k's slot, nil before its first call.
func (ms *meterSlots) find(k slotKey) *meterSlot {
	if m := ms.slots.Load(); m != nil {
		if sl := (*m)[k]; sl != nil {
			ms.last.Store(sl)
			return sl
		}
	}
	return nil
}

// keep adds sl, unless a concurrent first call added its key's already:
// the one kept.
func (ms *meterSlots) keep(sl *meterSlot) *meterSlot {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	old := ms.slots.Load()
	if old != nil {
		if have := (*old)[sl.slotKey]; have != nil {
			return have
		}
	}
	next := map[slotKey]*meterSlot{sl.slotKey: sl}
	if old != nil {
		maps.Copy(next, *old)
	}
	ms.slots.Store(&next)
	ms.last.Store(sl)
	return sl
}

// noBudget is the state of a caller without budgets: the header says only
// what the call cost.
var noBudget = BudgetState{MinuteLeft: -1, MonthLeft: -1}

// appendCredits appends the credit header's value to b: what a request
// cost and what is left of the tenant's budgets, an RFC 8941 dictionary
// of integers, "call=40, minute=99960, month=999999960", minute and month
// only when that budget is set. Charge appends it to the answer's room
// (jrpc.AnswerHeader), so that it costs no allocation.
func appendCredits(b []byte, total int64, st BudgetState) []byte {
	b = append(b, "call="...)
	b = strconv.AppendInt(b, total, 10)
	if st.MinuteLeft >= 0 {
		b = append(b, ", minute="...)
		b = strconv.AppendInt(b, st.MinuteLeft, 10)
	}
	if st.MonthLeft >= 0 {
		b = append(b, ", month="...)
		b = strconv.AppendInt(b, st.MonthLeft, 10)
	}
	return b
}

// setCredits sets the credit header of h (nil over WebSocket) under its
// canonical key.
func setCredits(h *jrpc.AnswerHeader, total int64, st BudgetState) {
	if h != nil {
		h.SetRoom(creditsHeader, appendCredits(h.Room(), total, st))
	}
}

// Credits is what a credit header says: the request's cost and what is
// left of the tenant's budgets, -1 for a budget not set.
type Credits struct {
	Call, Minute, Month int64
}

// ParseCredits reads an X-Venn-Credits value ("call=40, minute=99960,
// month=999999960"), for clients and tests. Members it does not know are
// skipped, as RFC 8941 asks; call must be there.
func ParseCredits(v string) (Credits, error) {
	c := Credits{Call: -1, Minute: -1, Month: -1}
	for m := range strings.SplitSeq(v, ",") {
		k, n, ok := strings.Cut(strings.Trim(m, " \t"), "=")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "call":
			dst = &c.Call
		case "minute":
			dst = &c.Minute
		case "month":
			dst = &c.Month
		default:
			continue
		}
		x, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return c, fmt.Errorf("credits header %q: %s: %w", v, k, err)
		}
		*dst = x
	}
	if c.Call < 0 {
		return c, fmt.Errorf("credits header %q: no call member", v)
	}
	return c, nil
}

// gatewayFault reports venn's own failures (no remote, timeout, shutting
// down, limits): the tenant is not charged for them.
func gatewayFault(code int) bool { return code <= -32050 && code >= -32099 }

// overBudget is the refusal of a tenant's message once a budget is spent:
// -32005 with the reset time, HTTP 429 with Retry-After.
func (cl *client) overBudget() *jrpc.Refusal {
	t := cl.tenant
	if t == nil || !t.budget.Limited() || !t.account.mayBeOver() {
		return nil
	}
	e := cl.e
	st := e.budgets.state(t.account, t.budget)
	if st.Over == "" {
		return nil
	}
	if t.rejected != nil {
		t.rejected[st.Over == "month"].Inc()
	}
	wait := max(st.Reset.Sub(e.budgets.now()), time.Second)
	secs := int64((wait + time.Second - 1) / time.Second)
	limit := t.budget.PerMinute
	if st.Over == "month" {
		limit = t.budget.PerMonth
	}
	reset := st.Reset.UTC().Format(time.RFC3339)
	return &jrpc.Refusal{Status: http.StatusTooManyRequests, RetryAfter: strconv.FormatInt(secs, 10), Err: &jrpc.Error{
		Code: CodeOverBudget,
		Message: "credit budget exceeded: tenant " + t.name + " has spent its " + st.Over + "ly budget of " +
			strconv.FormatInt(limit, 10) + " credits; it resets at " + reset,
		Data: []byte(`{"budget":"` + st.Over + `ly","limit":` + strconv.FormatInt(limit, 10) + `,"reset_at":"` + reset +
			`","retry_after_ms":` + strconv.FormatInt(wait.Milliseconds(), 10) + `}`),
	}}
}

// CodeOverBudget answers the calls of a tenant whose credit budget is
// spent: EIP-1474's "limit exceeded".
const CodeOverBudget = -32005

// creditMetrics are the per-tenant series: tenants are bounded by the
// configuration.
type creditMetrics struct {
	credits  *prometheus.CounterVec
	rejected *prometheus.CounterVec
}

func newCreditMetrics(reg prometheus.Registerer) *creditMetrics {
	if reg == nil {
		return nil
	}
	return &creditMetrics{
		credits: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn",
			Name:      "tenant_credits_total",
			Help:      "Credits tenants' calls cost, by tenant.",
		}, []string{"tenant"})),
		rejected: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn",
			Name:      "budget_rejections_total",
			Help:      "Requests refused because a tenant's credit budget was spent, by tenant and period (minute, month).",
		}, []string{"tenant", "period"})),
	}
}
