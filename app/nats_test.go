package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/natstest"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// check-config names each problem of the nats section by its field.
func TestNATSConfigProblems(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string
	}{
		{
			name: "valid, with defaults",
			give: "nats: {url: nats://127.0.0.1:4222, token: t}\n",
		},
		{
			name: "a misspelt field",
			give: "nats: {url: nats://127.0.0.1:4222, prefx: acme}\n",
			want: []string{`nats.prefx (line 8): field prefx not found in nats; did you mean "prefix"?`},
		},
		{
			name: "every value problem at once, no secret quoted",
			give: "nats:\n  url: http://u:hunter2@127.0.0.1:4222\n  prefix: venn.*\n  password: hunter2\n  rpc: {max_in_flight: -1}\n",
			want: []string{
				`nats.url: server 1 of the list: scheme must be nats, tls, ws or wss, not "http"`,
				`nats.prefix: "venn.*" holds a wildcard (* or >) or white space`,
				"nats.user: required with password",
				"nats.rpc.max_in_flight: must be at least 1",
			},
		},
		{
			name: "credentials without a url",
			give: "nats: {credentials_file: /etc/venn/nats.creds}\n",
			want: []string{"nats.url: required when any other nats field is set"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(minimal + tt.give))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it, want %q", tt.want)
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("problems:\n%s\nwant:\n%s", err, strings.Join(tt.want, "\n"))
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("a problem quotes the password: %v", err)
			}
		})
	}
	c := mustParse(t, minimal+"nats: {url: nats://127.0.0.1:4222}\n")
	if c.NATS.Prefix != "venn" || c.NATS.RPCSubject("ethereum") != "venn.ethereum.rpc" {
		t.Fatalf("nats defaults: %+v", c.NATS)
	}
}

// venn serves a chain over NATS request/reply beside HTTP: the same
// answers byte for byte, the same API keys (in a NATS header), /readyz
// showing the connection; and a NATS crash neither stops HTTP nor makes
// the replica unready, and the replica serves NATS again once it is
// back.
func TestAppServesJSONRPCOverNATS(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	s := startApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
nats: {url: "`+ns.URL()+`", reconnect_wait: 50ms, reconnect_jitter: 10ms}
auth:
  keys:
    - {name: app, key: s3cret-key-0123456789}
chains:
  - name: eth
    chain_id: 1337
    remotes:
      - {name: node, url: "`+node.URL()+`"}
`))
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	metrics := "http://" + s.metrics.bound.String()
	testkit.WaitFor(t, 10*time.Second, "replica ready", func() bool {
		code, _ := get(t, client, metrics+"/readyz")
		return code == http.StatusOK
	})
	nc := ns.Connect()
	batch := `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},
		{"jsonrpc":"2.0","id":"b","method":"eth_getBlockByNumber","params":["0x5",false]},
		{"jsonrpc":"2.0","method":"eth_blockNumber"},
		{"jsonrpc":"2.0","id":3,"method":"no_such_method"},
		{"bad":true}]`
	natsRequest := func(body, key string) ([]byte, error) {
		m := natsgo.NewMsg("venn.eth.rpc")
		m.Data = []byte(body)
		if key != "" {
			m.Header.Set("X-Api-Key", key)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return nil, err
		}
		return res.Data, nil
	}
	httpPost := func(body string) []byte {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.rpc.bound.String()+"/eth", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", "s3cret-key-0123456789")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return b
	}

	t.Run("a mixed batch, byte for byte", func(t *testing.T) {
		got, err := natsRequest(batch, "s3cret-key-0123456789")
		if err != nil {
			t.Fatal(err)
		}
		if want := httpPost(batch); !bytes.Equal(got, want) {
			t.Fatalf("over NATS:\n%s\nover HTTP:\n%s", got, want)
		}
		if !bytes.Contains(got, []byte(`"result":"0x539"`)) || !bytes.Contains(got, []byte(`"number":"0x5"`)) {
			t.Fatalf("batch answer lacks the node's answers: %s", got)
		}
	})
	t.Run("no key", func(t *testing.T) {
		got, err := natsRequest(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`, "")
		if err != nil {
			t.Fatal(err)
		}
		var res struct{ Error *jrpc.Error }
		if json.Unmarshal(got, &res) != nil || res.Error == nil || res.Error.Code != jrpc.CodeUnauthorized {
			t.Fatalf("without a key: %s", got)
		}
	})
	t.Run("readyz shows nats", func(t *testing.T) {
		var r readiness
		_, body := get(t, client, metrics+"/readyz")
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		if r.NATS == nil || r.NATS.State != "connected" || r.NATS.Server != ns.URL() {
			t.Fatalf("readyz nats = %+v", r.NATS)
		}
	})

	ns.Kill()
	t.Run("NATS down: HTTP serves, still ready", func(t *testing.T) {
		if got := httpPost(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`); string(got) != `{"jsonrpc":"2.0","id":1,"result":"0x539"}` {
			t.Fatalf("HTTP with NATS down: %s", got)
		}
		var r readiness
		testkit.WaitFor(t, 10*time.Second, "readyz shows nats reconnecting", func() bool {
			code, body := get(t, client, metrics+"/readyz")
			if code != http.StatusOK {
				t.Fatalf("readyz %d with NATS down: %s", code, body)
			}
			return json.Unmarshal([]byte(body), &r) == nil && r.NATS != nil && r.NATS.State == "reconnecting"
		})
	})
	ns.Restart()
	t.Run("NATS back: served again", func(t *testing.T) {
		var got []byte
		testkit.WaitFor(t, 20*time.Second, "a request over NATS answered after the restart", func() bool {
			var err error
			got, err = natsRequest(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`, "s3cret-key-0123456789")
			return err == nil
		})
		if string(got) != `{"jsonrpc":"2.0","id":1,"result":"0x539"}` {
			t.Fatalf("after the restart: %s", got)
		}
	})
}

// NATS requests carry no client address: per-address rate limits do not
// pool every NATS client into one bucket (keys' limits still apply),
// while HTTP clients stay limited by address.
func TestNATSRequestsOutsideAddressLimits(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true})
	s := startApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: ""
shutdown_timeout: 5s
nats: {url: "`+ns.URL()+`"}
rate_limits: {ip: {rps: 0.001, burst: 2}}
chains:
  - name: eth
    chain_id: 1337
    remotes:
      - {name: node, url: "http://`+testkit.ClosedAddr(t)+`"}
`))
	nc := ns.Connect()
	call := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`
	for i := range 5 {
		m, err := nc.Request("venn.eth.rpc", []byte(call), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != `{"jsonrpc":"2.0","id":1,"result":"0x539"}` {
			t.Fatalf("NATS request %d: %s", i, m.Data)
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var last wireResponse
	for range 3 {
		last = post(t, client, "http://"+s.rpc.bound.String()+"/eth", call)
	}
	if last.Error == nil || last.Error.Code != jrpc.CodeRateLimited {
		t.Fatalf("third HTTP call over burst 2: %+v, want rate limited", last)
	}
}
