package edge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unsafe"

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
// says in one header what the request cost and what is left. Callers with
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
			setCreditsHeader(h, total, noBudget)
		}
		return
	}
	if t.credits != nil {
		t.credits.Add(float64(total))
	}
	if !t.budget.Limited() {
		if h != nil {
			setCreditsHeader(h, total, noBudget)
		}
		return
	}
	st := e.budgets.spend(t.account, total, t.budget)
	if h != nil {
		setCreditsHeader(h, total, st)
	}
}

// noBudget is the state of a caller without budgets: the header says only
// what the call cost.
var noBudget = BudgetState{MinuteLeft: -1, MonthLeft: -1}

// creditsValue is the credit header's value and its one-element slice in
// one allocation: the value's bytes are written once, then only read.
type creditsValue struct {
	vs  [1]string
	buf [len("call=, minute=, month=") + 3*20]byte
}

// setCreditsHeader says in one header what a request cost and what is left
// of the tenant's budgets, an RFC 8941 dictionary of integers:
// "call=40, minute=99960, month=999999960", minute and month only when
// that budget is set. It is set under its canonical key (no
// Header.Set), in one allocation.
func setCreditsHeader(h http.Header, total int64, st BudgetState) {
	v := new(creditsValue)
	b := append(v.buf[:0], "call="...)
	b = strconv.AppendInt(b, total, 10)
	if st.MinuteLeft >= 0 {
		b = append(b, ", minute="...)
		b = strconv.AppendInt(b, st.MinuteLeft, 10)
	}
	if st.MonthLeft >= 0 {
		b = append(b, ", month="...)
		b = strconv.AppendInt(b, st.MonthLeft, 10)
	}
	v.vs[0] = unsafe.String(unsafe.SliceData(b), len(b))
	h[creditsHeader] = v.vs[:]
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
