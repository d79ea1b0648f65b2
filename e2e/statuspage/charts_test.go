package statuspage

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// chartChains is how many chains the charts test serves: the page must
// stay readable with this many.
const chartChains = 20

// chartStep is the charts' step in the test. The ring keeps 90 steps: the
// window stops growing once it spans them, and the test watches it grow
// by four steps of traffic. The chains must be up within the ring's span
// (90 s): with 20 of them on a loaded machine that took most of the 22.5 s
// a 250 ms step gives, and the window was full before the traffic began.
const chartStep = time.Second

// startManyChains serves chain "dev" and chartChains-1 more in front of
// two fake nodes, the charts sampled every chartStep; it returns the status
// page's base URL and dev's JSON-RPC URL.
func startManyChains(t *testing.T) (base, rpc string) {
	t.Helper()
	// The head's timestamp is now: the window may answer for five block
	// times (a minute) by its age alone, not only while head polls come
	// in time, which they need not on a loaded machine with 20 chains.
	gen := uint64(time.Now().Unix()) - 100*12
	n0 := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, GenesisTime: gen})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, GenesisTime: gen})
	addr, listen := testkit.ClosedAddr(t), testkit.ClosedAddr(t)
	var y strings.Builder
	fmt.Fprintf(&y, "listen: %s\nmetrics_listen: \"\"\nadmin_listen: %s\n", listen, addr)
	fmt.Fprintf(&y, "admin: {tokens: [{name: browser, token: %s}], chart_step: %s}\nlog: {level: warn}\nchains:\n", token, chartStep)
	for i := range chartChains {
		name := "dev"
		if i > 0 {
			name = fmt.Sprintf("chain%02d", i)
		}
		fmt.Fprintf(&y, "  - name: %s\n    chain_id: 1337\n    remotes:\n", name)
		fmt.Fprintf(&y, "      - {name: alpha, url: %q}\n      - {name: beta, url: %q, tier: secondary}\n", n0.URL()+"/PATHSECRET", n1.URL())
	}
	serve(t, y.String())
	return "http://" + addr, "http://" + listen + "/dev"
}

// send posts n rounds of calls to rpc: answered by the head window, by
// venn, by the remotes, and one the remotes refuse.
func send(t *testing.T, rpc string, n int) {
	t.Helper()
	for i := range n {
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`,
			`{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["latest",false]}`,
			`{"jsonrpc":"2.0","id":3,"method":"eth_chainId","params":[]}`,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"eth_getBalance","params":["0x%040x","latest"]}`, i+1),
			`{"jsonrpc":"2.0","id":5,"method":"eth_nosuchmethod","params":[]}`,
		} {
			resp, err := http.Post(rpc, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

// cardJS reads every chain card: its windows as stated, and its charts'
// windows and lines (points drawn, and how many stand above the axis).
const cardJS = `[...document.querySelectorAll('.card[data-chain]')].map(c => ({
	Chain: c.dataset.chain,
	Windows: [...c.querySelectorAll('p.window')].map(w => w.textContent.trim()),
	WindowSeconds: (c.querySelector('p.window[data-window-seconds]') || {dataset: {}}).dataset.windowSeconds || '',
	Charts: [...c.querySelectorAll('figure.chart')].map(f => ({
		Caption: f.querySelector('figcaption').textContent,
		WindowSeconds: f.dataset.windowSeconds,
		Lines: [...f.querySelectorAll('path.line')].map(p => {
			const ys = [...p.getAttribute('d').matchAll(/[ML][0-9.]+,([0-9.]+)/g)].map(m => parseFloat(m[1]));
			return {Name: p.dataset.line, Points: ys.length, Above: ys.filter(y => y < 59.5).length};
		}),
	})),
}))`

// answered is the calls source answered in answers.
func answered(answers []admin.SourceCount, source string) float64 {
	for _, a := range answers {
		if a.Source == source {
			return a.Calls
		}
	}
	return 0
}

type chartLine struct {
	Name          string
	Points, Above int
}

type chartFig struct {
	Caption, WindowSeconds string
	Lines                  []chartLine
}

type card struct {
	Chain         string
	Windows       []string
	WindowSeconds string
	Charts        []chartFig
}

// TestStatusPageCharts: after traffic, every one of 20 chain cards states
// the window of its figures ("now" for the head, "last ..." for the
// calls), its charts share that window, and dev's calls and errors
// charts draw points above the axis; the chain page charts each remote's
// latency and share; on a phone's 390 px the pages do not scroll
// sideways and the charts keep a readable width.
func TestStatusPageCharts(t *testing.T) {
	path := requireChromium(t)
	base, rpc := startManyChains(t)
	// Ready, and dev's head window up to the remotes' head: a chain is
	// ready once a remote is in rotation, while its window still fills
	// from block 0 (over a second unloaded, with 20 chains filling), and
	// until it holds the head, dev's head calls go to the remotes.
	testkit.WaitFor(t, 45*time.Second, "every chain ready, dev's head window at the head", func() bool {
		o := overview(t, base)
		for _, c := range o.Chains {
			if !c.Ready {
				return false
			}
		}
		dev := o.Chains[0]
		return len(o.Chains) == chartChains && dev.Head > 0 && dev.Window.To >= dev.Head
	})
	// Traffic over several chart steps, so the charts have points to
	// draw: rounds of calls until the window has grown by four steps and
	// the head window has answered some. The admin API is read once a
	// round: with 20 chains it is not cheap.
	grow := (4 * chartStep).Seconds()
	from := overview(t, base).Chains[0].Recent.WindowSeconds
	if span := (90 * chartStep).Seconds(); from+grow > span {
		t.Fatalf("the chains took %.0f s to be ready: the charts' window (%.0f s at most) cannot grow by %.0f s more", from, span, grow)
	}
	deadline := time.Now().Add(60 * time.Second)
	for round := 0; ; round++ {
		send(t, rpc, 3)
		r := overview(t, base).Chains[0].Recent
		if r.WindowSeconds >= from+grow && answered(r.Answers, "head") > 0 && round >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("in 60 s of traffic the charts' window grew from %.0f s to %.0f s (want %.0f s more), answers %+v", from, r.WindowSeconds, grow, r.Answers)
		}
	}
	b := startBrowser(t, path)
	shots := t.TempDir()
	if d := os.Getenv("VENN_SCREENSHOT_DIR"); d != "" {
		shots = d
	}
	b.navigate(base + "/status?pause=1")
	b.signIn(token)

	var cards []card
	testkit.WaitFor(t, 15*time.Second, "the signed-in overview's cards", func() bool {
		return b.tryEval(cardJS, &cards) == nil && len(cards) > 0
	})
	if len(cards) != chartChains {
		t.Fatalf("%d cards, want %d", len(cards), chartChains)
	}
	for _, c := range cards {
		if len(c.Windows) != 2 || c.Windows[0] != "now" || !strings.HasPrefix(c.Windows[1], "last ") || c.WindowSeconds == "" {
			t.Errorf("card %s states windows %q (%s s); want now and last ...", c.Chain, c.Windows, c.WindowSeconds)
		}
		if len(c.Charts) != 3 {
			t.Errorf("card %s has %d charts, want 3", c.Chain, len(c.Charts))
		}
		for _, f := range c.Charts {
			if f.WindowSeconds != c.WindowSeconds || !strings.Contains(f.Caption, "last ") {
				t.Errorf("card %s: chart %q over %s s, the card's figures over %s s", c.Chain, f.Caption, f.WindowSeconds, c.WindowSeconds)
			}
		}
	}
	dev := cards[0]
	if dev.Chain != "dev" {
		t.Fatalf("first card %s, want dev", dev.Chain)
	}
	drawn := func(f chartFig, line string) chartLine {
		for _, l := range f.Lines {
			if l.Name == line {
				return l
			}
		}
		return chartLine{}
	}
	if l := drawn(dev.Charts[0], "remotes"); l.Points < 3 || l.Above == 0 {
		t.Errorf("dev's calls chart draws remotes %+v: want 3 points or more, some above 0 (%+v)", l, dev.Charts[0])
	}
	if l := drawn(dev.Charts[0], "head"); l.Above == 0 {
		t.Errorf("dev's calls chart draws head %+v: want some above 0", l)
	}
	if l := drawn(dev.Charts[1], "errors"); l.Points < 3 || l.Above == 0 {
		t.Errorf("dev's errors chart draws %+v: want 3 points or more, some above 0", l)
	}
	t.Logf("overview screenshot: %s", b.screenshot(shots, "charts-overview.png"))

	b.navigate(base + "/status/chains/dev?pause=1")
	var figs []chartFig
	b.eval(`[...document.querySelectorAll('figure.chart')].map(f => ({Caption: f.querySelector('figcaption').textContent,
		WindowSeconds: f.dataset.windowSeconds, Lines: [...f.querySelectorAll('path.line')].map(p => ({Name: p.dataset.line,
		Points: [...p.getAttribute('d').matchAll(/[ML][0-9.]+,/g)].length}))}))`, &figs)
	captions := map[string]chartFig{}
	for _, f := range figs {
		name, _, _ := strings.Cut(f.Caption, " ·")
		captions[name] = f
	}
	for _, want := range []string{"calls by source", "errors", "head age", "share of upstream calls", "alpha latency", "beta latency"} {
		if _, ok := captions[want]; !ok {
			t.Errorf("the chain page has no %q chart: %+v", want, figs)
		}
	}
	if l := drawn(captions["alpha latency"], "p99"); l.Points < 1 {
		t.Errorf("alpha's latency chart draws p99 %+v", l)
	}
	if l := drawn(captions["share of upstream calls"], "alpha"); l.Points < 1 {
		t.Errorf("the share chart draws alpha %+v", l)
	}
	t.Logf("chain screenshot: %s", b.screenshot(shots, "charts-chain.png"))

	// A phone.
	b.call(b.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": true}, nil)
	for _, page := range []string{"/status?pause=1", "/status/chains/dev?pause=1"} {
		b.navigate(base + page)
		var fit struct {
			ScrollWidth   int
			Widths        []float64
			Width, Charts int
		}
		b.eval(`({ScrollWidth: document.documentElement.scrollWidth, Width: window.innerWidth,
			Widths: [...document.querySelectorAll('figure.chart svg')].map(s => s.getBoundingClientRect().width)})`, &fit)
		if fit.ScrollWidth > 390 {
			t.Errorf("%s on a 390 px phone is %d px wide: it scrolls sideways", page, fit.ScrollWidth)
		}
		for _, w := range fit.Widths {
			if w < 150 || w > 390 {
				t.Errorf("%s on a 390 px phone: a chart %.0f px wide", page, w)
				break
			}
		}
		if len(fit.Widths) == 0 {
			t.Errorf("%s on a phone shows no chart", page)
		}
		t.Logf("phone screenshot: %s", b.screenshot(shots, "phone"+strings.NewReplacer("/", "-", "?", "-").Replace(page)+".png"))
	}
}
