package app

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/wire"
)

// With no remote that can serve, a call's -32050 and /readyz say, remote
// by remote, what each last failed with: nothing listening, a certificate
// venn does not trust, another chain. The text names no key and no
// address.
func TestNoRemoteSaysWhy(t *testing.T) {
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0) // its handshakes fail on purpose
	untrusted.StartTLS()
	defer untrusted.Close()
	other := fakenode.Start(t, fakenode.Options{ChainID: 5})
	closed := testkit.ClosedAddr(t)
	// What no text may show: the keys, and the remotes' addresses (IP
	// hosts are a self-hosted node's).
	secrets := []string{"SECRETKEY", closed, strings.TrimPrefix(untrusted.URL, "https://"), strings.TrimPrefix(other.URL(), "http://")}
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
log: {level: debug}
shutdown_timeout: 5s
chains:
  - name: test
    chain_id: 1337
    call_deadline: 2s
    remotes:
      - name: refused
        url: http://`+closed+`/SECRETKEY1
        timeout: 500ms
      - name: untrusted
        url: `+untrusted.URL+`/SECRETKEY2
        timeout: 500ms
      - name: other
        url: `+other.URL()+`/SECRETKEY3
        timeout: 500ms
`)
	logs := &testkit.Buffer{}
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(logs), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	metrics := "http://" + s.metrics.bound.String()
	rpc := "http://" + s.rpc.bound.String()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	want := map[string]string{"refused": wire.FailRefused, "untrusted": wire.FailTLS, "other": wire.FailWrongChain}
	kinds := func(rs []remotes.RemoteReason) map[string]string {
		got := map[string]string{}
		for _, r := range rs {
			got[r.Remote] = r.LastFailure
		}
		return got
	}
	same := func(got map[string]string) bool {
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return len(got) == len(want)
	}
	noSecret := func(what, text string) {
		t.Helper()
		for _, bad := range secrets {
			if strings.Contains(text, bad) {
				t.Errorf("%s holds %q: %s", what, bad, text)
			}
		}
	}

	var body string
	testkit.WaitFor(t, 10*time.Second, "/readyz names each remote's failure", func() bool {
		var r readiness
		_, body = get(t, client, metrics+"/readyz")
		if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Chains) != 1 {
			t.Fatalf("readyz body %q: %v", body, err)
		}
		return same(kinds(r.Chains[0].RemotesOut))
	})
	noSecret("/readyz", body)
	for _, k := range []string{"refused: chain_unverified, no_head (last: refused)", "untrusted: chain_unverified, no_head (last: tls)", "other: wrong_chain, no_head (last: wrong_chain)"} {
		if !strings.Contains(body, k) {
			t.Errorf("/readyz's reason lacks %q: %s", k, body)
		}
	}

	resp := post(t, client, rpc+"/test", `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}`)
	if resp.Error == nil || resp.Error.Code != jrpc.CodeNoRemote {
		t.Fatalf("got %+v, want -32050", resp)
	}
	var data struct {
		Remotes []remotes.RemoteReason `json:"remotes"`
	}
	if err := json.Unmarshal(resp.Error.Data, &data); err != nil {
		t.Fatalf("-32050 data %s: %v", resp.Error.Data, err)
	}
	if got := kinds(data.Remotes); !same(got) {
		t.Errorf("-32050 data says %v, want %v: %s", got, want, resp.Error.Data)
	}
	noSecret("-32050's data", string(resp.Error.Data))
	noSecret("the logs", logs.String())
}
