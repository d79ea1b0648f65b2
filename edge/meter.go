package edge

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/jrpc"
)

// A UsageSink keeps what each tenant's calls cost, for billing (package
// usage, in Postgres). Add must not block: it is on every answer's path.
// method is bounded (a known method, or "other"); tenant is a tenant's
// name, or an API key's without one.
type UsageSink interface {
	Add(tenant, chain, method string, calls, credits, errors, bytesOut int64)
}

var _ jrpc.Meter = (*client)(nil)

// Charge implements jrpc.Meter: it prices the answered calls, spends the
// credits from the tenant's budgets, hands them to usage, and over HTTP
// says in headers what the request cost and what is left. Callers with
// neither key nor tenant are not metered.
func (cl *client) Charge(_ context.Context, chain string, calls []jrpc.Charged, h http.Header) {
	e := cl.e
	account := ""
	switch {
	case cl.tenant != nil:
		account = cl.tenant.name
	case cl.key != nil:
		account = cl.key.name
	default:
		return
	}
	var total int64
	for _, c := range calls {
		var errs int64
		if c.Code != 0 {
			errs = 1
		}
		credits, label := e.pricing.price(c.Method, c.Source, c.Source != "" && !gatewayFault(c.Code))
		total += credits
		if e.usage != nil {
			e.usage.Add(account, chain, label, 1, credits, errs, int64(c.BytesOut))
		}
	}
	t := cl.tenant
	if t == nil {
		if h != nil {
			setHeader(h, creditsHeader, strconv.FormatInt(total, 10))
		}
		return
	}
	if t.credits != nil {
		t.credits.Add(float64(total))
	}
	if !t.budget.Limited() {
		if h != nil {
			setHeader(h, creditsHeader, strconv.FormatInt(total, 10))
		}
		return
	}
	st := e.budgets.spend(t.account, total, t.budget)
	if h != nil {
		setCreditHeaders(h, total, st)
	}
}

// setHeader sets header k, already in canonical form (the credit
// headers' constants), without Header.Set's canonicalizing: it was half
// of Charge's CPU.
func setHeader(h http.Header, k, v string) { h[k] = []string{v} }

// setCreditHeaders says what a tenant's request cost and what is left of
// its budgets: the three values are one string and their headers share
// one slice, two allocations rather than six (each header's slice capped,
// so that an append to one cannot reach the next).
func setCreditHeaders(h http.Header, total int64, st BudgetState) {
	var buf [3 * 20]byte
	b := strconv.AppendInt(buf[:0], total, 10)
	ends := [3]int{len(b), len(b), len(b)}
	if st.MinuteLeft >= 0 {
		b = strconv.AppendInt(b, st.MinuteLeft, 10)
		ends[1] = len(b)
	}
	ends[2] = len(b)
	if st.MonthLeft >= 0 {
		b = strconv.AppendInt(b, st.MonthLeft, 10)
		ends[2] = len(b)
	}
	all := string(b)
	vs := make([]string, 3)
	vs[0] = all[:ends[0]]
	h[creditsHeader] = vs[0:1:1]
	if st.MinuteLeft >= 0 {
		vs[1] = all[ends[0]:ends[1]]
		h[creditsMinuteHeader] = vs[1:2:2]
	}
	if st.MonthLeft >= 0 {
		vs[2] = all[ends[1]:ends[2]]
		h[creditsMonthHeader] = vs[2:3:3]
	}
}

// gatewayFault reports venn's own failures (no remote, timeout, shutting
// down, limits): the tenant is not charged for them.
func gatewayFault(code int) bool { return code <= -32050 && code >= -32099 }

// overBudget is the refusal of a tenant's message once a budget is spent:
// -32005 with the reset time, HTTP 429 with Retry-After.
func (cl *client) overBudget() *jrpc.Refusal {
	t := cl.tenant
	if t == nil || !t.budget.Limited() {
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
