package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
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

// Handler serves the API under /admin/ and the status page under
// /status. Every route needs a token when tokens are configured: the API
// as a bearer token, the page once, for a session.
func (a *Admin) Handler() http.Handler {
	top := chi.NewRouter()
	a.pageRoutes(top)
	top.Handle("/admin/*", a.apiHandler())
	return a.loopbackHost(top)
}

// loopbackHost refuses, without tokens, a request whose Host is not a
// loopback name: a page on another site whose name was rebound to
// 127.0.0.1 (DNS rebinding) must not read or act through a browser.
func (a *Admin) loopbackHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open() && !isLoopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, "without admin.tokens only a loopback Host (localhost, 127.0.0.1, [::1]) is served")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// crossSite refuses an action a browser was made to send from another
// site: it says so (Sec-Fetch-Site, Origin), or its body is not JSON, as a
// plain cross-site form's cannot be without the browser asking first.
func (a *Admin) crossSite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
			code, msg := 0, ""
			switch {
			case !a.sameOrigin(r):
				code, msg = http.StatusForbidden, "refused: a request from another site"
			case r.ContentLength != 0 && ct != "application/json":
				code, msg = http.StatusUnsupportedMediaType, "a body must be Content-Type: application/json"
			}
			if code != 0 {
				if act := actionOf(r); act != "" {
					a.m.actions.WithLabelValues(act, outcomeRefused).Inc()
				}
				writeError(w, code, msg)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Admin) apiHandler() http.Handler {
	r := chi.NewRouter()
	r.Get("/admin/status", a.getStatus)
	r.Get("/admin/chains", a.getChains)
	r.Get("/admin/chains/{chain}", a.getChain)
	r.Get("/admin/replicas", a.getReplicas)
	r.Get("/admin/config", a.getConfig)
	r.Get("/admin/usage", a.getUsage)
	r.Post("/admin/chains/{chain}/remotes/{remote}/cordon", a.postCordon)
	r.Post("/admin/chains/{chain}/remotes/{remote}/uncordon", a.postUncordon)
	r.Post("/admin/chains/{chain}/cache/purge", a.postPurge)
	r.Post("/admin/drain", a.postDrain)
	r.Post("/admin/reload", a.postReload)
	profileRoutes(r)
	return a.authenticate(actionOf, a.crossSite(r))
}

// actionOf names the action a request asks for, "" for a read.
func actionOf(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	for _, act := range []string{actionUncordon, actionCordon, actionDrain, actionReload, actionPurge} {
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
	cs := a.chainList()
	out := make([]ChainView, 0, len(cs))
	for _, c := range cs {
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
	v, err := Redact(a.running())
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

// actionError is an action refused or failed: the HTTP status and the
// message for the caller (never an internal error's text).
type actionError struct {
	code int
	msg  string
}

func (a *Admin) postCordon(w http.ResponseWriter, r *http.Request) {
	var req cordonRequest
	if err := decodeBody(r, &req); err != nil {
		a.m.actions.WithLabelValues(actionCordon, outcomeRefused).Inc()
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	body, aerr := a.cordon(r.Context(), chi.URLParam(r, "chain"), chi.URLParam(r, "remote"), caller(r.Context()), req)
	writeAction(w, body, aerr)
}

func (a *Admin) postUncordon(w http.ResponseWriter, r *http.Request) {
	body, aerr := a.uncordon(r.Context(), chi.URLParam(r, "chain"), chi.URLParam(r, "remote"), caller(r.Context()))
	writeAction(w, body, aerr)
}

func writeAction(w http.ResponseWriter, body any, aerr *actionError) {
	if aerr != nil {
		writeError(w, aerr.code, aerr.msg)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// cordon stores a cordon of chain's remote by the token named by, applies
// it here at once (the other replicas on the message), logs and counts
// it.
func (a *Admin) cordon(ctx context.Context, chain, name, by string, req cordonRequest) (map[string]any, *actionError) {
	c, aerr := a.remoteOf(chain, name)
	if aerr == nil {
		var mc remotes.ManualCordon
		if mc, aerr = a.cordonOf(name, by, req); aerr == nil {
			if err := a.store.put(ctx, c.Name, mc); err != nil {
				return nil, a.failed(actionCordon, c.Name, err)
			}
			a.sync.sync(ctx, c.Name)
			st := remoteStatus(c, name)
			a.m.actions.WithLabelValues(actionCordon, outcomeOK).Inc()
			a.log.Info("admin: remote cordoned", "chain", c.Name, "remote", name, "by", by, "reason", mc.Reason,
				"until", mc.Until, "applied", !st.CordonHeld)
			body := map[string]any{"cordon": mc, "applied": !st.CordonHeld, "remote": st}
			if st.CordonHeld {
				body["note"] = "held back: it is the chain's last remote in rotation; it applies once another is back"
			}
			return body, nil
		}
	}
	a.m.actions.WithLabelValues(actionCordon, outcomeRefused).Inc()
	return nil, aerr
}

// cordonOf checks a cordon request and makes its cordon.
func (a *Admin) cordonOf(name, by string, req cordonRequest) (remotes.ManualCordon, *actionError) {
	now := a.now()
	mc := remotes.ManualCordon{Remote: name, Reason: req.Reason, By: by, At: now, Until: req.Until}
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 {
			return mc, &actionError{http.StatusBadRequest, `"for" must be a positive duration like "30m"`}
		}
		mc.Until = now.Add(d)
	}
	switch {
	case len(mc.Reason) > maxReasonLen:
		return mc, &actionError{http.StatusBadRequest, fmt.Sprintf(`"reason" must be at most %d bytes`, maxReasonLen)}
	case !mc.Until.IsZero() && !mc.Until.After(now):
		return mc, &actionError{http.StatusBadRequest, "the expiry has passed"}
	}
	return mc, nil
}

// uncordon removes the cordon of chain's remote everywhere.
func (a *Admin) uncordon(ctx context.Context, chain, name, by string) (map[string]any, *actionError) {
	c, aerr := a.remoteOf(chain, name)
	if aerr != nil {
		a.m.actions.WithLabelValues(actionUncordon, outcomeRefused).Inc()
		return nil, aerr
	}
	removed, err := a.store.remove(ctx, c.Name, name)
	if err != nil {
		return nil, a.failed(actionUncordon, c.Name, err)
	}
	a.sync.sync(ctx, c.Name)
	a.m.actions.WithLabelValues(actionUncordon, outcomeOK).Inc()
	a.log.Info("admin: remote uncordoned", "chain", c.Name, "remote", name, "by", by, "was_cordoned", removed)
	return map[string]any{"removed": removed, "remote": remoteStatus(c, name)}, nil
}

// remoteOf finds a chain and one of its remotes.
func (a *Admin) remoteOf(chain, name string) (Chain, *actionError) {
	c, ok := a.chain(chain)
	if !ok {
		return Chain{}, &actionError{http.StatusNotFound, "no such chain"}
	}
	if !slices.ContainsFunc(c.Pool.Status(), func(s remotes.RemoteStatus) bool { return s.Name == name }) {
		return Chain{}, &actionError{http.StatusNotFound, "no such remote in the chain"}
	}
	return c, nil
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

// failed counts an action the store could not carry out; the error, which
// may name a Redis address, goes to the log only.
func (a *Admin) failed(action, chain string, err error) *actionError {
	a.m.actions.WithLabelValues(action, outcomeError).Inc()
	a.log.Error("admin: action failed", "action", action, "chain", chain, "err", err)
	return &actionError{http.StatusServiceUnavailable, "the cordon store is unavailable"}
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
