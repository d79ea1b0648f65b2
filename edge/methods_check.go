package edge

import (
	"context"
	"net/http"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// checkScoped says whether a caller held to scopes may call method, and if
// not why: methods.block first, then the blocklist (which the methods
// section or any of the caller's scopes may enable), then each scope's
// own block and allow lists.
func (p *MethodPolicy) checkScoped(method string, scopes []*scope) (authReason, bool) {
	if len(p.Block) > 0 && evm.MatchMethod(p.Block, method) {
		return authBlocked, false
	}
	if defaultBlocked(method) && !evm.MatchMethod(p.Enable, method) && !enabledBy(scopes, method) {
		return authBlocked, false
	}
	for _, s := range scopes {
		if r, ok := s.checkMethod(method); !ok {
			return r, false
		}
	}
	return 0, true
}

func enabledBy(scopes []*scope, method string) bool {
	for _, s := range scopes {
		if len(s.enable) > 0 && evm.MatchMethod(s.enable, method) {
			return true
		}
	}
	return false
}

// quietAdmission marks the request of a Permitted: its refusal is an
// answer to a question, not a client refused.
type quietAdmission struct{}

func quietly(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), quietAdmission{}, true))
}

// Admitted is Admit's refusal of the caller of r on a.Chain, nil when it
// is admitted, counting no refusal and taking from no rate limit: gRPC's
// head and status streams and Describe, which call no method, serve only
// a caller the edge admits (on each chain they read; TakeOne charges the
// opening once).
func (e *Edge) Admitted(r *http.Request, a jrpc.Admission) *jrpc.Refusal {
	_, refused := e.Admit(quietly(r), a)
	return refused
}

// TakeOne is Admitted, and then takes one call from the admitted caller's
// rate limits (its key's, its tenant's, its address's buckets) as a
// JSON-RPC call takes it, refused as that call would be: over a limit
// (-32055 "rate limited", counted in venn_ratelimit_rejections_total) or
// over its tenant's credit budget. gRPC charges the opening of a head or
// status stream, and a Describe, with it: they call no method, but a
// client opening them in a loop must pay as one calling does.
func (e *Edge) TakeOne(r *http.Request, a jrpc.Admission) *jrpc.Refusal {
	c, refused := e.Admit(quietly(r), a)
	if refused != nil {
		return refused
	}
	return c.Take(r.Context(), 1)
}

// Permitted is, of methods, those the caller of r may call on a.Chain as
// Admit and Check decide them (the methods section, the caller's key or
// token and its tenant's scopes; a scope's contracts aside, which decide
// on params): none when r would be refused on the chain. It counts no
// refusal and takes from no rate limit. gRPC's Describe lists them, so a
// client sees what it may call.
func (e *Edge) Permitted(r *http.Request, a jrpc.Admission, methods []string) []string {
	c, refused := e.Admit(quietly(r), a)
	if refused != nil {
		return nil
	}
	var scopes []*scope
	if cl, ok := c.(*client); ok {
		scopes = cl.scopes
	}
	out := make([]string, 0, len(methods))
	for _, m := range methods {
		if _, ok := e.methods.checkScoped(m, scopes); ok {
			out = append(out, m)
		}
	}
	return out
}
