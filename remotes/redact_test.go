package remotes

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// The secrets of the test remote; no client error or log may hold any of
// them, in any escaping.
const (
	rdUser     = "venn-user"
	rdPass     = "PASSWORDSECRET9"
	rdHostKey  = "HOSTKEY0a1b2c3d4"
	rdPathKey  = "PATHKEY0123456789abcdef"
	rdQueryKey = "QUERYKEY4567"
	rdWSKey    = "WSKEY9876543210zyx"
	rdBearer   = "BEARERTOKEN12345"
	rdAPIKey   = "XAPIKEY000111"
)

var rdSecrets = []string{rdUser, rdPass, rdHostKey, rdPathKey, rdQueryKey, rdWSKey, rdBearer, rdAPIKey,
	base64.StdEncoding.EncodeToString([]byte(rdUser + ":" + rdPass))}

// A remote that echoes its URL, key and headers in its errors, in every
// form seen from providers, never gets them to a client or into a log:
// over HTTP and WebSocket, in the message and in the data, with the call's
// error returned at once (a revert) or after failover (a retry). An error
// holding no secret reaches the client as the node sent it.
func TestSecretsNeverReachClientsOrLogs(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	host := strings.TrimPrefix(n.URL(), "http://")
	path := "/v3/" + rdPathKey + "?apikey=" + rdQueryKey + "&network=mainnet"
	headers := map[string]string{"Authorization": "Bearer " + rdBearer, "X-Api-Key": rdAPIKey}
	remotes := []struct {
		name string
		cfg  Config
	}{
		{"http with headers", Config{URL: "http://" + host + path, Headers: headers, WSURL: "ws://" + host + "/ws/" + rdWSKey}},
		{"http with user info", Config{URL: "http://" + rdUser + ":" + rdPass + "@" + host + path}},
		{"websocket with headers", Config{URL: "ws://" + host + path, Headers: headers}},
	}
	// What the remote says, from the request it got.
	echoes := []struct {
		name string
		code int
		echo func(r *http.Request) (msg string, data json.RawMessage)
	}{
		{"plain", 3, func(r *http.Request) (string, json.RawMessage) {
			return "execution reverted: bad key in " + r.URL.String() + " auth=" + r.Header.Get("Authorization") +
				" x-api-key=" + r.Header.Get("X-Api-Key"), nil
		}},
		{"escaped data", 3, func(r *http.Request) (string, json.RawMessage) {
			u := "http://" + r.Host + r.URL.String()
			esc := strings.NewReplacer("/", `\/`, "&", `\u0026`).Replace(u)
			return "execution reverted", json.RawMessage(`{"url":"` + esc + `","auth":"` +
				strings.ReplaceAll(r.Header.Get("Authorization"), "B", `\u0042`) + `","key":"` + r.Header.Get("X-Api-Key") + `"}`)
		}},
		{"percent-encoded", 3, func(r *http.Request) (string, json.RawMessage) {
			return "execution reverted: " + url.QueryEscape(r.URL.String()) + " " + strings.ToLower(url.QueryEscape(r.Header.Get("Authorization"))),
				json.RawMessage(strconv.Quote(url.PathEscape(r.Header.Get("X-Api-Key"))))
		}},
		{"double-escaped", -32000, func(r *http.Request) (string, json.RawMessage) {
			return `header not found for {"url":"` + strings.ReplaceAll(r.URL.String(), "/", `\/`) + `"}`,
				json.RawMessage(strconv.Quote(`{"auth":"` + strings.ReplaceAll(r.Header.Get("Authorization"), " ", `\u0020`) + `"}`))
		}},
	}
	for _, rt := range remotes {
		for _, et := range echoes {
			t.Run(rt.name+"/"+et.name, func(t *testing.T) {
				t.Cleanup(n.Reset)
				logs := &testkit.Buffer{}
				log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				cfg := rt.cfg
				cfg.Name, cfg.Timeout = "alpha", 2*time.Second
				p := rdPool(t, cfg, log)
				n.SetEcho(func(r *http.Request) *jrpc.Error {
					msg, data := et.echo(r)
					return &jrpc.Error{Code: et.code, Message: msg, Data: data}
				})
				_, err := call(t, p, "eth_call", `[{"to":"0x0000000000000000000000000000000000000001"},"latest"]`)
				if err == nil {
					t.Fatal("the call succeeded; want the echoed error")
				}
				got, _ := json.Marshal(jrpc.ToWire(err))
				if s := testkit.Leaked(string(got), rdSecrets, 3); s != "" {
					t.Errorf("the client got %q: %s", s, got)
				}
				if !bytes.Contains(got, []byte("[redacted]")) {
					t.Errorf("the client's error lost the echo or was not redacted: %s", got)
				}
				if s := testkit.Leaked(logs.String(), rdSecrets, 3); s != "" {
					t.Errorf("the log holds %q:\n%s", s, logs)
				}
				if !strings.Contains(logs.String(), `"msg":"remote call failed"`) {
					t.Errorf("the failed call was not logged:\n%s", logs)
				}
			})
		}
	}

	t.Run("no secret, no change", func(t *testing.T) {
		t.Cleanup(n.Reset)
		p := rdPool(t, Config{Name: "alpha", URL: "http://" + host + path, Headers: headers, Timeout: 2 * time.Second}, nil)
		want := &jrpc.Error{Code: 3, Message: "execution reverted: ERC20: transfer amount exceeds balance",
			Data: json.RawMessage(`"0x08c379a00000000000000000000000000000000000000000000000000000000000000020"`)}
		n.SetRPCErrorData(want.Code, want.Message, want.Data)
		_, err := call(t, p, "eth_call", `[{"to":"0x0000000000000000000000000000000000000001"},"latest"]`)
		var je *jrpc.Error
		if !errors.As(err, &je) || je.Code != want.Code || je.Message != want.Message || !bytes.Equal(je.Data, want.Data) {
			t.Fatalf("err = %#v; want the node's %#v", err, want)
		}
	})
}

// rdPool starts a pool of one remote with log and waits for it to serve.
func rdPool(t *testing.T, rc Config, log *slog.Logger) *Pool {
	t.Helper()
	p, err := NewPool(PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: time.Hour, CallDeadline: 5 * time.Second},
		[]Config{rc}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "remote ready", p.Ready)
	return p
}
