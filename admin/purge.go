package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/venn-gateway/venn/cache"
)

// purgeRequest is POST /admin/chains/{chain}/cache/purge's body: every
// field set narrows what is dropped (none: the chain's whole cache).
type purgeRequest struct {
	Method string `json:"method"`
	Remote string `json:"remote"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
}

// postPurge drops the chain's cache entries the request selects, from
// every tier and every replica's memory (cache.Cache.Purge).
func (a *Admin) postPurge(w http.ResponseWriter, r *http.Request) {
	var req purgeRequest
	if err := decodeBody(r, &req); err != nil {
		a.m.actions.WithLabelValues(actionPurge, outcomeRefused).Inc()
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	body, aerr := a.purge(r.Context(), chi.URLParam(r, "chain"), caller(r.Context()), req)
	writeAction(w, body, aerr)
}

func (a *Admin) purge(ctx context.Context, chain, by string, req purgeRequest) (map[string]any, *actionError) {
	c, ok := a.chain(chain)
	p := cache.Purge{Method: req.Method, Remote: req.Remote, From: req.From, To: req.To}
	var aerr *actionError
	switch {
	case !ok:
		aerr = &actionError{http.StatusNotFound, "no such chain"}
	case c.PurgeCache == nil:
		aerr = &actionError{http.StatusConflict, "the chain has no response cache"}
	case p.Validate() != nil:
		aerr = &actionError{http.StatusBadRequest, `"to" must be at or above "from"`}
	case len(req.Method) > maxReasonLen || len(req.Remote) > maxReasonLen:
		aerr = &actionError{http.StatusBadRequest, fmt.Sprintf(`"method" and "remote" must be at most %d bytes`, maxReasonLen)}
	}
	if aerr != nil {
		a.m.actions.WithLabelValues(actionPurge, outcomeRefused).Inc()
		return nil, aerr
	}
	n, err := c.PurgeCache(ctx, p)
	if err != nil {
		a.m.actions.WithLabelValues(actionPurge, outcomeError).Inc()
		a.log.Error("admin: action failed", "action", actionPurge, "chain", c.Name, "err", err)
		return nil, &actionError{http.StatusServiceUnavailable, fmt.Sprintf("purged %d entries, but a cache tier failed", n)}
	}
	a.m.actions.WithLabelValues(actionPurge, outcomeOK).Inc()
	a.log.Info("admin: cache purged", "chain", c.Name, "by", by, "method", p.Method, "remote", p.Remote,
		"from", p.From, "to", p.To, "entries", n)
	return map[string]any{"purged": n}, nil
}
