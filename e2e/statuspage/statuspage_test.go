// Package statuspage drives the status page in a real browser: venn in
// process in front of fake nodes, headless Chromium over the DevTools
// protocol. Where Chromium is absent its tests skip, saying how to install
// it, unless CI or VENN_REQUIRE_CHROMIUM is set (scripts/test.sh installs
// it and sets the latter): there they fail.
package statuspage

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/app"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

const token = "page-token-0123456789abcdef"

// secrets are in the config; the page must show none.
var secrets = []string{"PATHSECRET", "QUERYSECRET", "HEADERSECRET", token}

// startVenn serves chain "dev" in front of two fake nodes, with the admin
// API and status page at the returned base URL.
func startVenn(t *testing.T) string {
	t.Helper()
	n0 := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	addr := testkit.ClosedAddr(t)
	serve(t, `
listen: 127.0.0.1:0
metrics_listen: ""
admin_listen: `+addr+`
admin: {tokens: [{name: browser, token: `+token+`}]}
log: {level: warn}
chains:
  - name: dev
    chain_id: 1337
    remotes:
      - {name: alpha, url: "`+n0.URL()+`/PATHSECRET?key=QUERYSECRET", headers: {X-Key: HEADERSECRET}}
      - {name: beta, url: "`+n1.URL()+`/PATHSECRET", tier: secondary}
`)
	return "http://" + addr
}

// serve runs venn in process on the config, stopped when the test ends.
func serve(t *testing.T, config string) {
	t.Helper()
	cfg, err := app.Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	fx := app.New(cfg, app.LogOutput(io.Discard))
	if err := fx.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.Stop(context.Background()) })
}

func overview(t *testing.T, base string) admin.Overview {
	t.Helper()
	o, err := admin.Fetch(context.Background(), http.DefaultClient, base, token)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestStatusPageInBrowser signs in, checks the chain card and the remote
// rows against the admin API, cordons a remote with its button and sees it
// leave rotation, saves a screenshot, and finds no secret in any page.
func TestStatusPageInBrowser(t *testing.T) {
	path := requireChromium(t)
	base := startVenn(t)
	testkit.WaitFor(t, 10*time.Second, "both remotes in rotation", func() bool {
		return overview(t, base).Chains[0].InRotation == 2
	})
	b := startBrowser(t, path)
	shots := t.TempDir()
	if d := os.Getenv("VENN_SCREENSHOT_DIR"); d != "" {
		shots = d // kept for a look
	}

	before := overview(t, base).Chains[0] // the card is read between before and after
	b.navigate(base + "/status")
	b.signIn(token)
	var card struct {
		Chain string
		Head  string
		In    string
		Out   string
	}
	testkit.WaitFor(t, 10*time.Second, "the chain card", func() bool {
		return b.tryEval(`(() => { const c = document.querySelector('.card[data-chain]'); if (!c) return null;
			return {Chain: c.dataset.chain, Head: c.querySelector('.head').textContent,
				In: c.querySelector('[data-in]').dataset.in, Out: c.querySelector('[data-out]').dataset.out} })()`, &card) == nil &&
			card.Chain != ""
	})
	o := overview(t, base)
	head, err := strconv.ParseUint(card.Head, 10, 64)
	if c := o.Chains[0]; err != nil || card.Chain != c.Name || card.In != strconv.Itoa(c.InRotation) ||
		card.Out != strconv.Itoa(c.Out) || c.InRotation != before.InRotation || head < before.Head || head > c.Head {
		t.Errorf("card %+v, admin API %s: %d in, %d out, head %d (%d before)", card, c.Name, c.InRotation, c.Out, c.Head, before.Head)
	}
	t.Logf("overview screenshot: %s", b.screenshot(shots, "overview.png"))
	pages := []string{pageHTML(b)}

	b.navigate(base + "/status/chains/dev?pause=1")
	rows := remoteRows(b)
	for i, r := range o.Chains[0].Remotes {
		if i >= len(rows) || rows[i].Name != r.Name || rows[i].InRotation != "true" || rows[i].Tier != r.Tier {
			t.Errorf("row %d %+v, admin API %s %s in rotation %v", i, rows, r.Name, r.Tier, r.InRotation)
		}
	}
	b.eval(`(() => { const f = document.querySelector('tr[data-remote=beta] form');
		f.querySelector('input[name=reason]').value = 'browser test'; f.querySelector('button[name=cordon]').click() })()`, nil)
	testkit.WaitFor(t, 10*time.Second, "beta out of rotation on the page", func() bool {
		var rows []row
		return b.tryEval(rowsJS, &rows) == nil && len(rows) == 2 && rows[1].InRotation == "false"
	})
	if r := overview(t, base).Chains[0].Remotes[1]; r.InRotation || r.Cordon == nil || r.Cordon.By != "browser" || r.Cordon.Reason != "browser test" {
		t.Errorf("admin API after the button: %+v", r)
	}
	t.Logf("chain screenshot: %s", b.screenshot(shots, "chain.png"))
	pages = append(pages, pageHTML(b))
	for _, html := range pages {
		for _, s := range append(secrets, "127.0.0.1", "http://") {
			if strings.Contains(html, s) {
				t.Errorf("a page shows %q:\n%s", s, html)
			}
		}
	}
}

type row struct{ Name, Tier, InRotation string }

const rowsJS = `[...document.querySelectorAll('tr[data-remote]')].map(r => ({Name: r.dataset.remote,
	Tier: r.children[1].textContent, InRotation: r.dataset.inRotation}))`

func remoteRows(b *browser) []row {
	var rows []row
	b.eval(rowsJS, &rows)
	return rows
}

func pageHTML(b *browser) string {
	var html string
	b.eval(`document.documentElement.outerHTML`, &html)
	return html
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// requireChromium returns Chromium's path; without it the test skips, or
// fails where the browser is required (CI, VENN_REQUIRE_CHROMIUM).
func requireChromium(t *testing.T) string {
	t.Helper()
	path := chromiumPath()
	switch {
	case path != "":
		return path
	case os.Getenv("CI") != "" || os.Getenv("VENN_REQUIRE_CHROMIUM") != "":
		t.Fatal("chromium not found, and CI or VENN_REQUIRE_CHROMIUM requires it: apt-get install chromium (scripts/test.sh does), or set VENN_CHROMIUM")
	default:
		t.Skip("chromium not found: apt-get install chromium (scripts/test.sh does), or set VENN_CHROMIUM")
	}
	return ""
}
