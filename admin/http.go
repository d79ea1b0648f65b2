package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/venn-gateway/venn/remotes"
)

// Bounds of an action's request.
const (
	maxActionBody = 4 << 10
	maxReasonLen  = 200
)

// Handler serves the API under /admin/. Every route needs a token when
// tokens are configured.
func (a *Admin) Handler() http.Handler {
	r := chi.NewRouter()
	r.Get("/admin/status", a.getStatus)
	r.Get("/admin/chains", a.getChains)
	r.Get("/admin/chains/{chain}", a.getChain)
	r.Get("/admin/replicas", a.getReplicas)
	r.Get("/admin/config", a.getConfig)
	r.Post("/admin/chains/{chain}/remotes/{remote}/cordon", a.postCordon)
	r.Post("/admin/chains/{chain}/remotes/{remote}/uncordon", a.postUncordon)
	r.Post("/admin/drain", a.postDrain)
	r.Post("/admin/reload", a.postReload)
	return a.authenticate(actionOf, r)
}

// actionOf names the action a request asks for, "" for a read.
func actionOf(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	for _, act := range []string{actionUncordon, actionCordon, actionDrain, actionReload} {
		if strings.HasSuffix(r.URL.Path, "/"+act) {
			return act
		}
	}
	return ""
}

func (a *Admin) getStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.overview(r.Context()))
}

func (a *Admin) getChains(w http.ResponseWriter, r *http.Request) {
	out := make([]ChainView, 0, len(a.opts.Chains))
	for _, c := range a.opts.Chains {
		out = append(out, a.chainView(r.Context(), c, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *Admin) getChain(w http.ResponseWriter, r *http.Request) {
	c, ok := a.chain(chi.URLParam(r, "chain"))
	if !ok {
		writeError(w, http.StatusNotFound, "no such chain")
		return
	}
	writeJSON(w, http.StatusOK, a.chainView(r.Context(), c, true))
}

func (a *Admin) getReplicas(w http.ResponseWriter, r *http.Request) {
	rs, err := a.replicas(r.Context())
	body := map[string]any{"replicas": rs}
	if err != nil {
		body["error"] = "cannot read the cluster's replicas from Redis; this one only"
	}
	writeJSON(w, http.StatusOK, body)
}

func (a *Admin) getConfig(w http.ResponseWriter, _ *http.Request) {
	v, err := Redact(a.opts.Effective)
	if err != nil {
		a.log.Error("admin: redact config", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot show the config")
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// cordonRequest is POST .../cordon's body; For or Until may set an expiry.
type cordonRequest struct {
	Reason string    `json:"reason"`
	For    string    `json:"for"` // a Go duration: "30m"
	Until  time.Time `json:"until"`
}

func (a *Admin) postCordon(w http.ResponseWriter, r *http.Request) {
	c, name, ok := a.remoteOf(w, r, actionCordon)
	if !ok {
		return
	}
	var req cordonRequest
	if err := decodeBody(r, &req); err != nil {
		a.refuse(w, actionCordon, http.StatusBadRequest, err.Error())
		return
	}
	now := a.now()
	mc := remotes.ManualCordon{Remote: name, Reason: req.Reason, By: caller(r.Context()), At: now, Until: req.Until}
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 {
			a.refuse(w, actionCordon, http.StatusBadRequest, `"for" must be a positive duration like "30m"`)
			return
		}
		mc.Until = now.Add(d)
	}
	switch {
	case len(mc.Reason) > maxReasonLen:
		a.refuse(w, actionCordon, http.StatusBadRequest, fmt.Sprintf(`"reason" must be at most %d bytes`, maxReasonLen))
		return
	case !mc.Until.IsZero() && !mc.Until.After(now):
		a.refuse(w, actionCordon, http.StatusBadRequest, "the expiry has passed")
		return
	}
	if err := a.store.put(r.Context(), c.Name, mc); err != nil {
		a.failed(w, actionCordon, c.Name, err)
		return
	}
	a.sync.sync(r.Context(), c.Name) // this replica at once; the others on the message
	st := remoteStatus(c, name)
	a.m.actions.WithLabelValues(actionCordon, outcomeOK).Inc()
	a.log.Info("admin: remote cordoned", "chain", c.Name, "remote", name, "by", mc.By, "reason", mc.Reason,
		"until", mc.Until, "applied", !st.CordonHeld)
	body := map[string]any{"cordon": mc, "applied": !st.CordonHeld, "remote": st}
	if st.CordonHeld {
		body["note"] = "held back: it is the chain's last remote in rotation; it applies once another is back"
	}
	writeJSON(w, http.StatusOK, body)
}

func (a *Admin) postUncordon(w http.ResponseWriter, r *http.Request) {
	c, name, ok := a.remoteOf(w, r, actionUncordon)
	if !ok {
		return
	}
	removed, err := a.store.remove(r.Context(), c.Name, name)
	if err != nil {
		a.failed(w, actionUncordon, c.Name, err)
		return
	}
	a.sync.sync(r.Context(), c.Name)
	a.m.actions.WithLabelValues(actionUncordon, outcomeOK).Inc()
	a.log.Info("admin: remote uncordoned", "chain", c.Name, "remote", name, "by", caller(r.Context()), "was_cordoned", removed)
	writeJSON(w, http.StatusOK, map[string]any{"removed": removed, "remote": remoteStatus(c, name)})
}

// remoteOf finds the chain and remote a request names, or answers 404.
func (a *Admin) remoteOf(w http.ResponseWriter, r *http.Request, action string) (Chain, string, bool) {
	c, ok := a.chain(chi.URLParam(r, "chain"))
	if !ok {
		a.refuse(w, action, http.StatusNotFound, "no such chain")
		return Chain{}, "", false
	}
	name := chi.URLParam(r, "remote")
	if !slices.ContainsFunc(c.Pool.Status(), func(s remotes.RemoteStatus) bool { return s.Name == name }) {
		a.refuse(w, action, http.StatusNotFound, "no such remote in the chain")
		return Chain{}, "", false
	}
	return c, name, true
}

func remoteStatus(c Chain, name string) remotes.RemoteStatus {
	for _, s := range c.Pool.Status() {
		if s.Name == name {
			return s
		}
	}
	return remotes.RemoteStatus{Name: name}
}

func (a *Admin) postDrain(w http.ResponseWriter, r *http.Request) {
	if a.opts.Drain == nil {
		a.refuse(w, actionDrain, http.StatusNotImplemented, "drain not available")
		return
	}
	a.mu.Lock()
	rep := a.opts.Drain(r.Context())
	a.draining.Store(true)
	a.mu.Unlock()
	a.m.actions.WithLabelValues(actionDrain, outcomeOK).Inc()
	a.log.Info("admin: replica drained", "by", caller(r.Context()), "released", rep.Released, "kept", rep.Kept)
	writeJSON(w, http.StatusOK, rep)
}

func (a *Admin) postReload(w http.ResponseWriter, r *http.Request) {
	if a.opts.Reload == nil {
		a.refuse(w, actionReload, http.StatusNotImplemented, "reload not available")
		return
	}
	a.mu.Lock()
	rep, applied := a.opts.Reload(r.Context())
	a.mu.Unlock()
	code, outcome := http.StatusOK, outcomeOK
	if !applied {
		code, outcome = http.StatusUnprocessableEntity, outcomeError
	}
	a.m.actions.WithLabelValues(actionReload, outcome).Inc()
	a.log.Info("admin: reload", "by", caller(r.Context()), "applied", applied)
	writeJSON(w, code, rep)
}

func (a *Admin) refuse(w http.ResponseWriter, action string, code int, msg string) {
	a.m.actions.WithLabelValues(action, outcomeRefused).Inc()
	writeError(w, code, msg)
}

// failed answers an action the store could not carry out; the error, which
// may name a Redis address, goes to the log only.
func (a *Admin) failed(w http.ResponseWriter, action, chain string, err error) {
	a.m.actions.WithLabelValues(action, outcomeError).Inc()
	a.log.Error("admin: action failed", "action", action, "chain", chain, "err", err)
	writeError(w, http.StatusServiceUnavailable, "the cordon store is unavailable")
}

// decodeBody reads an action's small JSON body; an empty body is {}.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("body: %v", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
