package admin

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// browser is an HTTP client that keeps cookies and does not follow
// redirects, as a test of a form's answer wants.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func pageGet(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}

func pagePost(t *testing.T, c *http.Client, u string, form url.Values, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestStatusPage: the page asks for a token, then shows the chain's card
// and its remotes, and its cordon button takes a remote out; a form from
// another origin is refused; no address is ever shown.
func TestStatusPage(t *testing.T) {
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100}), fakenode.Start(t, fakenode.Options{Head: 100})}
	r := startReplica(t, "page", "solo", nodes, nil, &clock{now: time.Now()})
	c := browser(t)
	base := r.srv.URL

	if code, body := pageGet(t, c, base+"/status"); code != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) {
		t.Fatalf("status without a session = %d %s", code, body)
	}
	resp := pagePost(t, c, base+"/status/login", url.Values{"token": {"wrong-token-0123456789"}, "next": {"/status"}}, base)
	if loc := resp.Header.Get("Location"); !strings.Contains(loc, "wrong+token") {
		t.Fatalf("wrong token: %d %s", resp.StatusCode, loc)
	}
	resp = pagePost(t, c, base+"/status/login", url.Values{"token": {testToken}, "next": {"/status/chains/page"}}, base)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/status/chains/page" {
		t.Fatalf("sign in = %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}

	code, body := pageGet(t, c, base+"/status")
	for _, want := range []string{`data-chain="page"`, `<dd class="head">100</dd>`, `data-in="2"`, `http-equiv="refresh"`, "signed in as alice"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("overview lacks %s: %d %s", want, code, body)
		}
	}
	_, body = pageGet(t, c, base+"/status/chains/page")
	if !strings.Contains(body, `data-remote="n1" data-in-rotation="true"`) || !strings.Contains(body, `>Cordon</button>`) {
		t.Fatalf("chain page: %s", body)
	}

	action := base + "/status/chains/page/remotes/n1/cordon"
	if resp := pagePost(t, c, action, url.Values{"reason": {"x"}}, "http://evil.example"); resp.StatusCode != http.StatusForbidden || outBy(r.pool, "n1") {
		t.Fatalf("a cross-origin form = %d, cordoned %v", resp.StatusCode, outBy(r.pool, "n1"))
	}
	if resp := pagePost(t, browser(t), action, url.Values{}, base); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a form without a session = %d", resp.StatusCode)
	}
	resp = pagePost(t, c, action, url.Values{"reason": {"slow"}, "for": {"1h"}}, base)
	if resp.StatusCode != http.StatusSeeOther || !outBy(r.pool, "n1") {
		t.Fatalf("cordon button = %d %s, cordoned %v", resp.StatusCode, resp.Header.Get("Location"), outBy(r.pool, "n1"))
	}
	_, body = pageGet(t, c, base+resp.Header.Get("Location"))
	for _, want := range []string{"cordoned n1", `data-remote="n1" data-in-rotation="false"`, "cordoned by alice", ">Uncordon</button>"} {
		if !strings.Contains(body, want) {
			t.Errorf("chain page after the cordon lacks %s: %s", want, body)
		}
	}
	resp = pagePost(t, c, base+"/status/chains/page/remotes/n1/uncordon", nil, base)
	if resp.StatusCode != http.StatusSeeOther || outBy(r.pool, "n1") {
		t.Fatalf("uncordon button = %d, cordoned %v", resp.StatusCode, outBy(r.pool, "n1"))
	}
	for _, p := range []string{"/status", "/status/chains/page"} {
		if _, body := pageGet(t, c, base+p); strings.Contains(body, "127.0.0.1") || strings.Contains(body, "http://") {
			t.Errorf("%s shows an address: %s", p, body)
		}
	}
	if code, body := pageGet(t, c, base+"/status/style.css"); code != http.StatusOK || !strings.Contains(body, ".card") {
		t.Errorf("style.css = %d", code)
	}
}
