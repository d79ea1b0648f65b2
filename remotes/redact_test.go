package remotes

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
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

// escapes is one layer of every escape a remote's text may use: JSON
// (\/ \\ \" \' \u00XX \xXX), percent-encoding and HTML entities, each
// standing for an ASCII character. The oracle decodes with it, apart from
// the redactor's own code.
var escapes = regexp.MustCompile(`\\u00([0-7][0-9a-fA-F])|\\x([0-7][0-9a-fA-F])|\\(["\\/'])|%([0-7][0-9a-fA-F])|&(amp|quot|lt|gt|apos);|&#([0-9]{1,7});|&#[xX]([0-9a-fA-F]{1,6});`)

func unescapeOnce(s string) string {
	return escapes.ReplaceAllStringFunc(s, func(m string) string {
		g := escapes.FindStringSubmatch(m)
		switch {
		case g[1] != "":
			v, _ := strconv.ParseUint(g[1], 16, 8)
			return string(rune(v))
		case g[2] != "":
			v, _ := strconv.ParseUint(g[2], 16, 8)
			return string(rune(v))
		case g[3] != "":
			return g[3]
		case g[4] != "":
			v, _ := strconv.ParseUint(g[4], 16, 8)
			return string(rune(v))
		case g[5] != "":
			return map[string]string{"amp": "&", "quot": `"`, "lt": "<", "gt": ">", "apos": "'"}[g[5]]
		case g[6] != "":
			if v, _ := strconv.Atoi(g[6]); v < 0x80 {
				return string(rune(v))
			}
		case g[7] != "":
			if v, _ := strconv.ParseUint(g[7], 16, 32); v < 0x80 {
				return string(rune(v))
			}
		}
		return m
	})
}

// leaked reports the secret that text holds, in any letter case and up
// to redactDepth layers of escaping, or "".
func leaked(text string, secrets []string) string {
	for depth := 0; depth <= redactDepth; depth++ {
		low := strings.ToLower(text)
		for _, s := range secrets {
			if strings.Contains(low, strings.ToLower(s)) {
				return s
			}
		}
		text = unescapeOnce(low)
	}
	return ""
}

func rdOptions() transportOptions {
	return transportOptions{
		Name:      "alpha",
		URL:       "https://" + rdUser + ":" + rdPass + "@" + rdHostKey + ".provider.example/v3/" + rdPathKey + "?apikey=" + rdQueryKey + "&network=mainnet",
		OtherURLs: []string{"wss://ws.provider.example/ws/" + rdWSKey},
		Headers: http.Header{
			"Authorization": {"Bearer " + rdBearer},
			"X-Api-Key":     {rdAPIKey},
			"User-Agent":    {"venn-test"},
		},
	}
}

// Every secret of a remote, echoed in every escaping seen from providers
// and proxies, is redacted; text without one is left as it was.
func TestRedactorFindsEverySecret(t *testing.T) {
	opts := rdOptions()
	red := opts.redactor()
	bareURL := strings.Replace(opts.URL, rdUser+":"+rdPass+"@", "", 1)
	pct := func(s string, hex string) string { // every character percent-encoded
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, hex, s[i])
		}
		return b.String()
	}
	tests := []struct{ name, give string }{
		{"url in a message", "invalid key for POST " + bareURL},
		{"path key alone", "project " + rdPathKey + " over its quota"},
		{"upper-cased", "INVALID KEY " + strings.ToUpper(rdPathKey)},
		{"lower-cased", "invalid key " + strings.ToLower(rdQueryKey)},
		{"query value", "apikey=" + rdQueryKey + " is not allowed"},
		{"host key", "lookup " + rdHostKey + ".provider.example: no such host"},
		{"user info", "user " + rdUser + " password " + rdPass},
		{"bearer header", "Authorization: Bearer " + rdBearer + " rejected"},
		{"bearer token alone", `token "` + rdBearer + `" expired`},
		{"api key header", "x-api-key " + rdAPIKey + " unknown"},
		{"basic credential", "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(rdUser+":"+rdPass))},
		{"ws url", "subscribe to wss://ws.provider.example/ws/" + rdWSKey + " failed"},
		{"json-escaped slashes", `{"url":"` + strings.ReplaceAll(bareURL, "/", `\/`) + `"}`},
		{"\\u002f slashes", `{"url":"` + strings.ReplaceAll(bareURL, "/", `\u002f`) + `"}`},
		{"\\u0026 in the query", `{"url":"` + strings.ReplaceAll(bareURL, "&", `\u0026`) + `"}`},
		{"percent-encoded URL", "redirect=" + url.QueryEscape(bareURL)},
		{"percent-encoded lower case", "redirect=" + strings.ToLower(url.QueryEscape(bareURL))},
		{"every character percent-encoded", "key=" + pct(rdPathKey, "%%%02X")},
		{"every character percent-encoded, lower case", "key=" + pct(rdPathKey, "%%%02x")},
		{"every character \\u-escaped", `"` + pct(rdBearer, `\u%04x`) + `"`},
		{"HTML page", "<p>No route for " + strings.ReplaceAll(bareURL, "&", "&amp;") + "</p>"},
		{"HTML numeric entities", "<p>" + pct(rdAPIKey, "&#%d;") + "</p>"},
		{"JSON in JSON", `{"detail":"{\"url\":\"` + strings.ReplaceAll(bareURL, "/", `\\\/`) + `\"}"}`},
		{"percent-encoded twice", "u=" + url.QueryEscape(url.QueryEscape(bareURL))},
		{"percent inside JSON inside percent", "u=" + url.QueryEscape(`"`+pct(rdWSKey, `\u%04x`)+`"`)},
		{"mixed per character", rdPathKey[:3] + "%" + fmt.Sprintf("%02X", rdPathKey[3]) + `\u00` + fmt.Sprintf("%02x", rdPathKey[4]) + strings.ToUpper(rdPathKey[5:])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := red.redact(tt.give)
			if s := leaked(got, rdSecrets); s != "" {
				t.Errorf("secret %q survives in %q", s, got)
			}
			if !strings.Contains(got, redactedText) {
				t.Errorf("nothing redacted in %q", got)
			}
		})
	}

	// Node text holding no secret is the node's, byte for byte.
	for _, give := range []string{
		"execution reverted: ERC20: transfer amount exceeds balance",
		"missing trie node 0xab (path ) state 127 is not available",
		"header not found",
		"invalid argument 0: json: cannot unmarshal hex string without 0x prefix into Go value of type common.Address",
		`100% of \"gas\" used: &amp; more %zz \u12`,
		"query returned more than 10000 results. Try with this block range [0x1, 0x2].",
		"eth-mainnet provider v3 rpc api network mainnet user",
	} {
		if got := red.redact(give); got != give {
			t.Errorf("%q became %q", give, got)
		}
	}
}

// FuzzRedactor embeds a key, each character escaped its own way up to
// three layers deep, in arbitrary text: no escaping lets it through, and
// the redactor never panics.
func FuzzRedactor(f *testing.F) {
	f.Add([]byte("0123456789abcdefKEY"), "invalid key ", " for project", []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte("abcdefabcdefabcdef"), `{"url":"https:\/\/`, `"}`, []byte{4})
	f.Add([]byte("x"), "%", "%2", []byte{2, 8, 12})
	f.Add([]byte("SECRET-key_value-1"), `\\`, `&#`, []byte{9, 10, 11, 6, 7})
	const keyChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	encoders := []func(c byte) string{
		func(c byte) string { return string(c) },
		func(c byte) string { return strings.ToUpper(string(c)) },
		func(c byte) string { return fmt.Sprintf("%%%02X", c) },
		func(c byte) string { return fmt.Sprintf("%%%02x", c) },
		func(c byte) string { return fmt.Sprintf(`\u%04x`, c) },
		func(c byte) string { return fmt.Sprintf(`\x%02X`, c) },
		func(c byte) string { return fmt.Sprintf("&#%d;", c) },
		func(c byte) string { return fmt.Sprintf("&#x%X;", c) },
		func(c byte) string { return fmt.Sprintf("%%25%02X", c) },      // percent, twice
		func(c byte) string { return fmt.Sprintf(`\\u%04X`, c) },       // JSON in JSON
		func(c byte) string { return fmt.Sprintf(`%%5Cu%04x`, c) },     // JSON, percent-encoded
		func(c byte) string { return fmt.Sprintf(`\u0025%02x`, c) },    // percent, JSON-escaped
		func(c byte) string { return fmt.Sprintf(`%%2525%02X`, c) },    // percent, three times
		func(c byte) string { return fmt.Sprintf(`\\u0025%02x`, c) },   // percent in JSON in JSON
		func(c byte) string { return fmt.Sprintf(`&amp;#%d;`, c) },     // an entity, escaped
		func(c byte) string { return fmt.Sprintf(`\u0026#x%02x;`, c) }, // an entity, JSON-escaped
	}
	f.Fuzz(func(t *testing.T, raw []byte, before, after string, enc []byte) {
		// Long text adds nothing the redactor does not do for short text,
		// and the oracle is slow on it.
		before, after = before[:min(len(before), 1024)], after[:min(len(after), 1024)]
		key := make([]byte, 0, 64)
		for _, c := range raw[:min(len(raw), 64)] {
			key = append(key, keyChars[int(c)%len(keyChars)])
		}
		for len(key) < 16 { // long enough to look like a key in a path
			key = append(key, keyChars[len(key)%len(keyChars)])
		}
		opts := transportOptions{Name: "fuzz", URL: "http://10.1.2.3:8545/" + string(key)}
		red := opts.redactor()
		var b strings.Builder
		b.WriteString(before)
		for i, c := range key {
			e := 0
			if len(enc) > 0 {
				e = int(enc[i%len(enc)]) % len(encoders)
			}
			b.WriteString(encoders[e](c))
		}
		b.WriteString(after)
		text := b.String()
		got := red.redact(text)
		if s := leaked(got, []string{string(key)}); s != "" {
			t.Fatalf("key %q survives in %q (from %q)", key, got, text)
		}
		// Text holding no key is left as it was.
		if clean := red.redact(before + after); leaked(before+after, []string{string(key)}) == "" && clean != before+after {
			t.Fatalf("%q holds no key but became %q", before+after, clean)
		}
		quoted, _ := json.Marshal(text)
		if clean := red.redactJSON(quoted); !json.Valid(clean) || leaked(string(clean), []string{string(key)}) != "" {
			t.Fatalf("redacted JSON %s is not JSON, or holds the key", clean)
		}
	})
}

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
				wire, _ := json.Marshal(jrpc.ToWire(err))
				if s := leaked(string(wire), rdSecrets); s != "" {
					t.Errorf("the client got %q: %s", s, wire)
				}
				if !bytes.Contains(wire, []byte(redactedText)) {
					t.Errorf("the client's error lost the echo or was not redacted: %s", wire)
				}
				if s := leaked(logs.String(), rdSecrets); s != "" {
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

// Status bodies are redacted before they are cut, so that no part of a
// key survives at the cut.
func TestHTTPStatusBodyRedacted(t *testing.T) {
	tpNoLeaks(t)
	pad := strings.Repeat("x", statusBodyMax-10)
	for _, give := range []string{
		"<html><body>401: no access for " + tpSecretPath + "?" + tpSecretQuery + "</body></html>",
		pad + tpSecretPath, // the key across the cut
	} {
		tr, _ := tpNewHTTP(t, transportOptions{}, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, give)
		})
		_, _, err := tr.call(context.Background(), "eth_blockNumber", nil)
		se, ok := errors.AsType[*HTTPStatusError](err)
		if !ok || se.Status != http.StatusUnauthorized {
			t.Fatalf("err = %v; want an HTTPStatusError 401", err)
		}
		if strings.Contains(se.Body, "SECR") {
			t.Errorf("body %q holds the key", se.Body)
		}
		if !strings.Contains(se.Body, redactedText) {
			t.Errorf("body %q: nothing redacted", se.Body)
		}
	}
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

// BenchmarkRedact is the redactor on the error text of a busy gateway:
// reverts without a secret (the common case) and an echoed URL.
func BenchmarkRedact(b *testing.B) {
	opts := rdOptions()
	red := opts.redactor()
	for _, bb := range []struct{ name, give string }{
		{"revert", "execution reverted: ERC20: transfer amount exceeds balance"},
		{"revert data", `"0x08c379a0` + strings.Repeat("0", 64) + `20` + strings.Repeat("0", 62) + `"`},
		{"escaped url", `{"url":"https:\/\/` + rdHostKey + `.provider.example\/v3\/` + rdPathKey + `"}`},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				red.redact(bb.give)
			}
		})
	}
}

// A remote's error is bounded before it is redacted and forwarded: a
// megabytes-long message made of escapes must not make venn decode every
// layer of it, nor hand it to the client.
func TestUpstreamErrorTextBounded(t *testing.T) {
	tpNoLeaks(t)
	const n = 8 << 20
	msg := strings.Repeat(`\\u0041`, n/7) // each decodes to \u0041, and that to A
	data := `"` + strings.Repeat("%41", n/3) + `"`
	tr, _ := tpNewHTTP(t, transportOptions{}, func(w http.ResponseWriter, r *http.Request) {
		for _, s := range []string{`{"jsonrpc":"2.0","id":`, replyID(r), `,"error":{"code":-32000,"message":"`, msg, `","data":`, data, `}}`} {
			io.WriteString(w, s) // in pieces: the server must not allocate the reply
		}
	})
	var err error
	got := allocated(func() { _, _, err = tr.call(context.Background(), "eth_call", nil) })
	size := int64(len(msg) + len(data))
	ue, ok := errors.AsType[*UpstreamError](err)
	if !ok {
		t.Fatalf("err = %v; want the remote's error", err)
	}
	if len(ue.Err.Message) > maxErrorText+3 || !strings.HasPrefix(ue.Err.Message, `\u0041\u0041`) {
		t.Errorf("message of %d bytes starting %.20q; want at most %d, the remote's start", len(ue.Err.Message), ue.Err.Message, maxErrorText)
	}
	if len(ue.Err.Data) > 100 || !json.Valid(ue.Err.Data) {
		t.Errorf("data %.100s; want a short note", ue.Err.Data)
	}
	// The reply's chunks and its buffer, and some MiB for the error: not
	// several times the reply over, for decoding and redacting all of it.
	if got > 3*size {
		t.Errorf("the call allocated %d MiB for a %d MiB reply", got>>20, size>>20)
	}
}

// boundError cuts an error object into one that is JSON, whatever escape
// falls at the cut.
func TestBoundError(t *testing.T) {
	big := func(unit string) string { return strings.Repeat(unit, 3*maxErrorText/len(unit)+1) }
	for _, give := range []string{
		`{"code":-32000,"message":"` + big(`\u00e9`) + `"}`,
		`{"code":-32000,"message":"` + big(`a\\`) + `","data":"0x01"}`,
		`{"code":-32000,"message":"` + big(`\"`) + `","data":"` + big("ab") + `"}`,
		`{"message":"short","data":"` + big("ab") + `"}`,
		`{"code":3,"message":` + big(" ") + `1,"data":{"a":1}}`,
	} {
		got := boundError([]byte(give))
		var je jrpc.Error
		if err := json.Unmarshal(got, &je); err != nil {
			t.Errorf("%.60s...: %v", got, err)
			continue
		}
		if len(je.Message) > maxErrorText+3 || len(je.Data) > maxErrorText {
			t.Errorf("%.60s...: message %d bytes, data %d bytes", got, len(je.Message), len(je.Data))
		}
	}
}
