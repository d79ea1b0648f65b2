package admin

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// The status page: server-rendered HTML for people, on the admin API's
// listener, its templates and stylesheet embedded. It shows what GET
// /admin/status answers (so never a URL, key or IP) and refreshes itself.
// With tokens it asks for one once and keeps a session cookie (HttpOnly,
// SameSite=Strict, in memory); its cordon and uncordon buttons are plain
// forms, refused unless they come from the page's own origin.

//go:embed page
var pageFS embed.FS

var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"ago":    func(now, t time.Time) string { return ago(now, t) },
	"join":   func(s []string) string { return strings.Join(s, ", ") },
	"pct":    func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"chart":  chartSVG,
	"window": windowText,
}).ParseFS(pageFS, "page/*.html"))

// Page settings.
const (
	pageRefresh   = 5 // seconds
	sessionCookie = "venn_admin"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 1024
	maxFormBytes  = 4 << 10
)

// pageData is what a page template reads.
type pageData struct {
	Title   string
	Refresh int // 0: paused
	O       Overview
	C       *ChainView
	Caller  string
	CanAct  bool
	Flash   string
	Path    string
	Now     time.Time
}

// sessions are the page's signed-in browsers: a random ID to the token's
// name, in this process only (a restart signs everyone out).
type sessions struct {
	mu   sync.Mutex
	byID map[string]session
}

type session struct {
	name    string
	sum     [sha256.Size]byte // the token's: a reload that removes it signs the session out
	expires time.Time
}

// keep drops the sessions of the tokens kept refuses.
func (s *sessions) keep(kept func(sum [sha256.Size]byte) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, v := range s.byID {
		if !kept(v.sum) {
			delete(s.byID, id)
		}
	}
}

func (s *sessions) add(name, tok string, now time.Time) string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[string]session{}
	}
	if len(s.byID) >= maxSessions { // bounded: the expired go, then any
		for k, v := range s.byID {
			if now.After(v.expires) {
				delete(s.byID, k)
			}
		}
		for k := range s.byID {
			if len(s.byID) < maxSessions {
				break
			}
			delete(s.byID, k)
		}
	}
	s.byID[id] = session{name: name, sum: sha256.Sum256([]byte(tok)), expires: now.Add(sessionTTL)}
	return id
}

func (s *sessions) name(id string, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[id]
	if !ok || now.After(v.expires) {
		return ""
	}
	return v.name
}

// pageRoutes adds the status page to r.
func (a *Admin) pageRoutes(r chi.Router) {
	r.Get("/status", a.pageOverview)
	r.Get("/status/chains/{chain}", a.pageChain)
	r.Get("/status/style.css", func(w http.ResponseWriter, _ *http.Request) {
		b, _ := pageFS.ReadFile("page/style.css")
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(b)
	})
	r.Post("/status/login", a.pageLogin)
	r.Post("/status/chains/{chain}/remotes/{remote}/{action:cordon|uncordon}", a.pageAction)
}

// pageCaller is who the browser is signed in as; "" none.
func (a *Admin) pageCaller(r *http.Request) string {
	if a.open() {
		return loopbackCaller
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	return a.pages.name(c.Value, a.now())
}

func (a *Admin) pageOverview(w http.ResponseWriter, r *http.Request) {
	a.renderPage(w, r, "overview.html", "status", nil)
}

// refreshOf is how often a page reloads itself: the overview unless
// paused; the chain page, whose forms a reload would wipe half typed,
// only when asked to (?refresh=1).
func refreshOf(r *http.Request, chain *Chain) int {
	q := r.URL.Query()
	if q.Get("pause") != "" || chain != nil && q.Get("refresh") == "" {
		return 0
	}
	return pageRefresh
}

func (a *Admin) pageChain(w http.ResponseWriter, r *http.Request) {
	c, ok := a.chain(chi.URLParam(r, "chain"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	a.renderPage(w, r, "chain.html", c.Name, &c)
}

// renderPage renders page (the sign-in page when a token is needed) with
// the overview; chain, when set, is the chain page's.
func (a *Admin) renderPage(w http.ResponseWriter, r *http.Request, page, title string, chain *Chain) {
	d := pageData{Title: title, Refresh: refreshOf(r, chain), Caller: a.pageCaller(r), Path: r.URL.Path, Now: a.now()}
	code := http.StatusOK
	if d.Caller == "" {
		page, d.Title, d.Refresh, code = "signin.html", "sign in", 0, http.StatusUnauthorized
		d.O = Overview{Version: a.opts.Version, Replica: a.opts.Replica}
	} else {
		d.CanAct = true
		d.O = a.overview(r.Context())
		if chain != nil {
			for i := range d.O.Chains {
				if d.O.Chains[i].Name == chain.Name {
					d.C = &d.O.Chains[i]
				}
			}
		}
	}
	d.Flash = flashText(r.URL.Query().Get("done"), r.URL.Query().Get("remote"), d.C)
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, page, d); err != nil {
		a.log.Error("admin: render status page", "page", page, "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (a *Admin) pageLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if !a.sameOrigin(r) || r.ParseForm() != nil {
		http.Error(w, "refused", http.StatusForbidden)
		return
	}
	next := r.PostForm.Get("next")
	if !strings.HasPrefix(next, "/status") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "?#\\") {
		next = "/status"
	}
	if !a.signins.allowed(a.now()) {
		http.Redirect(w, r, next+"?done=throttled", http.StatusSeeOther)
		return
	}
	tok := r.PostForm.Get("token")
	name := a.tokenName(tok)
	if name == "" {
		a.signins.fail()
		a.log.Warn("admin: status page sign-in with a wrong token")
		http.Redirect(w, r, next+"?done=wrong-token", http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: a.pages.add(name, tok, a.now()), Path: "/status",
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL.Seconds())})
	a.log.Info("admin: status page signed in", "by", name)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// pageAction is a cordon or uncordon button.
func (a *Admin) pageAction(w http.ResponseWriter, r *http.Request) {
	chain, remote, action := chi.URLParam(r, "chain"), chi.URLParam(r, "remote"), chi.URLParam(r, "action")
	by := a.pageCaller(r)
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if by == "" || !a.sameOrigin(r) || r.ParseForm() != nil {
		a.m.actions.WithLabelValues(action, outcomeUnauthorized).Inc()
		http.Error(w, "refused: sign in on the status page", http.StatusForbidden)
		return
	}
	var (
		body map[string]any
		aerr *actionError
	)
	if action == actionCordon {
		body, aerr = a.cordon(r.Context(), chain, remote, by, cordonRequest{Reason: r.PostForm.Get("reason"), For: r.PostForm.Get("for")})
	} else {
		_, aerr = a.uncordon(r.Context(), chain, remote, by)
	}
	held := aerr == nil && action == actionCordon && body["applied"] == false
	q := url.Values{"done": {flashOf(action, held, aerr)}, "remote": {remote}}
	http.Redirect(w, r, "/status/chains/"+url.PathEscape(chain)+"?"+q.Encode(), http.StatusSeeOther)
}

// sameOrigin refuses a form posted from another site: the browser says
// where it comes from (Sec-Fetch-Site, Origin); a client that says
// nothing (curl) is not a browser to be tricked.
func (a *Admin) sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	return true
}
