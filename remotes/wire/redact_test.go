package wire

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

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

func rdOptions() Options {
	return Options{
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
	red := opts.Redactor()
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
			got := red.Redact(tt.give)
			if s := testkit.Leaked(got, rdSecrets, redactDepth); s != "" {
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
		if got := red.Redact(give); got != give {
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
		opts := Options{Name: "fuzz", URL: "http://10.1.2.3:8545/" + string(key)}
		red := opts.Redactor()
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
		got := red.Redact(text)
		if s := testkit.Leaked(got, []string{string(key)}, redactDepth); s != "" {
			t.Fatalf("key %q survives in %q (from %q)", key, got, text)
		}
		// Text holding no key is left as it was.
		if clean := red.Redact(before + after); testkit.Leaked(before+after, []string{string(key)}, redactDepth) == "" && clean != before+after {
			t.Fatalf("%q holds no key but became %q", before+after, clean)
		}
		quoted, _ := json.Marshal(text)
		if clean := red.RedactJSON(quoted); !json.Valid(clean) || testkit.Leaked(string(clean), []string{string(key)}, redactDepth) != "" {
			t.Fatalf("redacted JSON %s is not JSON, or holds the key", clean)
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
		tr, _ := tpNewHTTP(t, Options{}, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, give)
		})
		_, _, err := tr.Call(context.Background(), "eth_blockNumber", nil)
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

// BenchmarkRedact is the redactor on the error text of a busy gateway:
// reverts without a secret (the common case) and an echoed URL.
func BenchmarkRedact(b *testing.B) {
	opts := rdOptions()
	red := opts.Redactor()
	for _, bb := range []struct{ name, give string }{
		{"revert", "execution reverted: ERC20: transfer amount exceeds balance"},
		{"revert data", `"0x08c379a0` + strings.Repeat("0", 64) + `20` + strings.Repeat("0", 62) + `"`},
		{"escaped url", `{"url":"https:\/\/` + rdHostKey + `.provider.example\/v3\/` + rdPathKey + `"}`},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				red.Redact(bb.give)
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
	tr, _ := tpNewHTTP(t, Options{}, func(w http.ResponseWriter, r *http.Request) {
		for _, s := range []string{`{"jsonrpc":"2.0","id":`, replyID(r), `,"error":{"code":-32000,"message":"`, msg, `","data":`, data, `}}`} {
			io.WriteString(w, s) // in pieces: the server must not allocate the reply
		}
	})
	var err error
	got := allocated(func() { _, _, err = tr.Call(context.Background(), "eth_call", nil) })
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
