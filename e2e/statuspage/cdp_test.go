package statuspage

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/testkit"
)

// A headless Chromium driven over the DevTools protocol: just what the
// status page test needs (navigate, evaluate, screenshot), on coder/
// websocket rather than a browser-automation library.

// chromiumPath finds Debian's chromium, or VENN_CHROMIUM; "" when absent.
func chromiumPath() string {
	if p := os.Getenv("VENN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one Chromium process and a page in it.
type browser struct {
	t       *testing.T
	conn    *websocket.Conn
	session string

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpReply
	done    chan struct{}
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startBrowser starts headless Chromium, stopped at cleanup, and opens a
// blank page in it.
func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-dev-shm-usage", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--user-data-dir="+t.TempDir(), "--window-size=1280,900", "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", path, err)
	}
	exited := make(chan struct{})
	wsURL := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "DevTools listening on "); ok {
				select {
				case wsURL <- u:
				default:
				}
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { cancel(); <-exited })
	var u string
	select {
	case u = <-wsURL:
	case <-exited:
		t.Fatal("chromium exited before it listened")
	case <-time.After(30 * time.Second):
		t.Fatal("chromium did not say where it listens within 30s")
	}
	conn, _, err := websocket.Dial(context.Background(), u, nil)
	if err != nil {
		t.Fatalf("dial devtools: %v", err)
	}
	conn.SetReadLimit(64 << 20) // screenshots
	b := &browser{t: t, conn: conn, waiting: map[int]chan cdpReply{}, done: make(chan struct{})}
	go b.read()
	t.Cleanup(func() { _ = conn.Close(websocket.StatusNormalClosure, ""); <-b.done })
	var target struct{ TargetID string }
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct{ SessionID string }
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	return b
}

// read hands each reply to its caller; events are not needed.
func (b *browser) read() {
	defer close(b.done)
	for {
		_, msg, err := b.conn.Read(context.Background())
		if err != nil {
			return
		}
		var m struct {
			ID int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg, &m) != nil || m.ID == 0 {
			continue
		}
		b.mu.Lock()
		ch := b.waiting[m.ID]
		delete(b.waiting, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call sends one command (on the page's session unless session is "")
// and decodes its result into out; a failure fails the test.
func (b *browser) call(session, method string, params any, out any) {
	b.t.Helper()
	if err := b.try(session, method, params, out); err != nil {
		b.t.Fatal(err)
	}
}

// try is call returning its failure: a page navigating away loses its
// context under an evaluation, and a poll tries again.
func (b *browser) try(session, method string, params any, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, _ := json.Marshal(msg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.conn.Write(ctx, websocket.MessageText, raw); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(r.Result, out); err != nil {
				return fmt.Errorf("%s: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: no answer within 30s", method)
	}
}

// eval evaluates js in the page and returns its value, decoded into out.
func (b *browser) eval(js string, out any) {
	b.t.Helper()
	if err := b.tryEval(js, out); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) tryEval(js string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := b.try(b.session, "Runtime.evaluate", map[string]any{"expression": js, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluate %q: %s", js, r.ExceptionDetails.Text)
	}
	if out != nil && len(r.Result.Value) > 0 {
		if err := json.Unmarshal(r.Result.Value, out); err != nil {
			return fmt.Errorf("evaluate %q: %w", js, err)
		}
	}
	return nil
}

// navigate opens url and waits until the page has loaded.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call(b.session, "Page.navigate", map[string]any{"url": url}, nil)
	b.waitLoaded(url)
}

// signIn submits the status page's sign-in form with token and waits for
// the signed-in page, whole: the sign-in page is itself a loaded page at
// the same address, so its URL and readyState say nothing.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.eval(`document.querySelector('input[name=token]').value = `+jsString(token)+`; document.querySelector('form.login').submit()`, nil)
	testkit.WaitFor(b.t, 15*time.Second, "the signed-in page loaded", func() bool {
		var st struct {
			State string
			Login bool
		}
		return b.tryEval(`({State: document.readyState, Login: !!document.querySelector('form.login')})`, &st) == nil &&
			st.State == "complete" && !st.Login
	})
}

// waitLoaded waits until the page at a URL starting with prefix is whole.
func (b *browser) waitLoaded(prefix string) {
	b.t.Helper()
	testkit.WaitFor(b.t, 15*time.Second, "page "+prefix+" loaded", func() bool {
		var st struct{ URL, State string }
		if b.tryEval(`({URL: location.href, State: document.readyState})`, &st) != nil {
			return false
		}
		return st.State == "complete" && strings.HasPrefix(st.URL, prefix)
	})
}

// screenshot saves the page as a PNG under dir and returns its path.
func (b *browser) screenshot(dir, name string) string {
	b.t.Helper()
	var r struct{ Data string }
	b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &r)
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

func (b *browser) String() string { return fmt.Sprintf("browser(session %s)", b.session) }
