package wire

// Redaction of a remote's secrets.
//
// A remote's URLs and headers carry its keys, and remotes repeat them: in
// error messages ("invalid key KEY"), in error data (the request URL, JSON
// escaped), in the HTML of a proxy's 401 page, and the standard library
// quotes URLs in its errors. Every text that came from a remote or may
// quote its URL goes through the remote's redactor before it reaches a
// client or a log.
//
// The redactor knows every secret value of the remote: each URL (url and
// ws_url) whole and without user info when it holds more than a public
// host, the user and password and the Basic credential they make, the host
// when it is private (an IP, a bare name, an internal domain: PrivateHost),
// the path and each path segment or host label that looks like a key (keys
// live in subdomains too), the query and each of its values, and each
// configured header value, with and without its scheme ("Bearer KEY"). A
// public host name is no secret and stays: it says which provider failed.
// Transport errors also lose the IP addresses they quote (MaskAddrs). It
// finds secrets in any
// escaping a remote is likely to use, mixed and nested a few layers deep:
// JSON (\/, \u002f, \\), percent-encoding (either case), HTML entities,
// and any letter case. Text holding no secret is returned as it was, byte
// for byte.

import (
	"encoding/base64"
	"encoding/json"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"
)

const (
	redactedText = "[redacted]"
	// minSecretLen: shorter values are never redacted. They are no secret,
	// and redacting them would mangle ordinary words of node errors.
	minSecretLen = 4
	// redactDepth is how many layers of escaping are seen through (a
	// percent-encoded URL in a JSON string in a JSON string is three).
	redactDepth = 3
)

// redactor replaces a remote's secrets in text. Its methods are safe for
// concurrent use; a nil redactor knows no secret.
type Redactor struct {
	secrets  []string // lower-cased, distinct
	shortest int
}

// redactor builds the redactor of the remote o configures.
func (o *Options) Redactor() *Redactor {
	s := secretSet{}
	s.url(o.URL)
	for _, raw := range o.OtherURLs {
		s.url(raw)
	}
	for k, vs := range o.Headers {
		for _, v := range vs {
			s.header(k, v)
		}
	}
	r := &Redactor{}
	for v := range s {
		r.secrets = append(r.secrets, v)
		if r.shortest == 0 || len(v) < r.shortest {
			r.shortest = len(v)
		}
	}
	slices.Sort(r.secrets) // a stable order
	return r
}

// secretSet collects lower-cased secret values.
type secretSet map[string]struct{}

func (s secretSet) add(v string) {
	if len(v) >= minSecretLen {
		s[lowerASCII(v)] = struct{}{}
	}
}

// addKeyLike adds v when it looks like a key: parts of a URL that are not
// known to be secret (a path segment, a host label) are redacted only then,
// so that "/v3", "eth-mainnet" or "rpc" stay readable in node errors.
func (s secretSet) addKeyLike(v string) {
	if LooksLikeKey(v) {
		s.add(v)
	}
}

func (s secretSet) url(raw string) {
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		s.add(raw)
		for _, f := range strings.FieldsFunc(raw, func(c rune) bool { return !isKeyChar(c) }) {
			s.addKeyLike(f)
		}
		return
	}
	if u.User != nil {
		user := u.User.Username()
		pass, _ := u.User.Password()
		s.add(user)
		s.add(pass)
		s.add(u.User.String())
		// What the HTTP transport sends as Basic auth for them.
		s.add(base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)))
	}
	// A public host name is shown: it says which provider failed ("lookup
	// eth.example.org: no such host") and is no secret, but a label that
	// looks like a key goes (some providers put the key in a subdomain).
	// A private host is the address of a self-hosted node: it goes. Of a
	// bare name only the forms a URL gives it are secret (node:8545,
	// //node): the word alone would mangle node errors ("missing trie node").
	h := u.Hostname()
	switch {
	case !PrivateHost(h):
		for _, label := range strings.Split(h, ".") {
			s.addKeyLike(label)
		}
	case strings.ContainsAny(h, ".:"): // an IP or a private domain
		s.add(u.Host)
		s.add(h)
	default:
		if u.Port() != "" {
			s.add(u.Host)
		}
		s.add("//" + h)
		s.addKeyLike(h)
	}
	s.add(u.RawQuery)
	for _, kv := range strings.Split(u.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		s.value(k, v)
		if dk, err := url.QueryUnescape(k); err == nil {
			if dv, err := url.QueryUnescape(v); err == nil {
				s.value(dk, dv)
			}
		}
	}
	if p := u.EscapedPath(); p != "/" {
		s.add(p)
		s.add(u.Path)
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		s.addKeyLike(seg)
		if d, err := url.PathUnescape(seg); err == nil {
			s.addKeyLike(d)
		}
	}
	// A private host's URL whole: one span for it reads better than its
	// pieces redacted one by one. A public host's stays, its keys go.
	if PrivateHost(h) {
		s.add(raw)
		bare := *u
		bare.User = nil
		s.add(bare.String())
	}
}

// PrivateHost reports whether a URL's host is private: an IP literal, a
// name of one label (node, localhost), or a name under a top-level domain
// no registry delegates (internal, local, lan, corp, home.arpa, ...). It
// names a self-hosted node and is redacted wherever venn shows text; a
// public host name (eth-mainnet.provider.io) is shown, since it is no
// secret and says which provider failed. The one rule of logs, errors,
// /readyz and the admin API.
func PrivateHost(host string) bool {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil {
		return true
	}
	i := strings.LastIndexByte(host, '.')
	if i < 0 {
		return true
	}
	low := lowerASCII(host)
	if low == "home.arpa" || strings.HasSuffix(low, ".home.arpa") {
		return true
	}
	_, icann := publicsuffix.PublicSuffix(low[i+1:])
	return !icann
}

// RedactURL is how a remote's URL is shown, where one is shown at all (the
// admin API's config): its scheme, its host when public (PrivateHost) with
// any label that looks like a key redacted, its port, and "/[redacted]"
// for whatever follows (user info, path, query: where keys live).
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return redactedText
	}
	b := strings.Builder{}
	b.WriteString(u.Scheme + "://")
	h := u.Hostname()
	if PrivateHost(h) {
		b.WriteString(redactedText)
	} else {
		for i, label := range strings.Split(h, ".") {
			if i > 0 {
				b.WriteByte('.')
			}
			if LooksLikeKey(label) {
				label = redactedText
			}
			b.WriteString(label)
		}
	}
	if p := u.Port(); p != "" {
		b.WriteString(":" + p)
	}
	if u.User != nil || u.RawQuery != "" || len(u.EscapedPath()) > 1 || u.Fragment != "" {
		b.WriteString("/" + redactedText)
	}
	return b.String()
}

// value adds a query value: any value of a parameter named like a secret
// (key, token, ...), else one that looks like a key.
func (s secretSet) value(name, v string) {
	if SecretName(name) {
		s.add(v)
	} else {
		s.addKeyLike(v)
	}
}

// header adds a configured header's value and, when it has a scheme
// ("Bearer KEY", "Basic B64"), its credential and what a Basic one encodes.
func (s secretSet) header(name, v string) {
	v = strings.TrimSpace(v)
	s.value(name, v)
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok {
		return
	}
	cred = strings.TrimSpace(cred)
	s.value(name, cred)
	if strings.EqualFold(scheme, "basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
			user, pass, _ := strings.Cut(string(dec), ":")
			s.add(string(dec))
			s.add(user)
			s.add(pass)
		}
	}
}

// SecretName reports a header or query parameter name that says its value
// is a credential.
func SecretName(name string) bool {
	n := lowerASCII(name)
	for _, w := range []string{"auth", "key", "token", "secret", "pass", "cred", "sig", "session", "cookie", "jwt"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// LooksLikeKey: 16 characters or more, or 8 or more mixing letters and
// digits. API keys are 20 to 64 random characters; names of networks and
// API versions are short or have no digits.
func LooksLikeKey(v string) bool {
	if len(v) >= 16 {
		return true
	}
	if len(v) < 8 {
		return false
	}
	var digit, letter bool
	for i := 0; i < len(v); i++ {
		c := v[i]
		digit = digit || '0' <= c && c <= '9'
		letter = letter || 'a' <= c|0x20 && c|0x20 <= 'z'
	}
	return digit && letter
}

func isKeyChar(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// redact returns s with every secret replaced by "[redacted]"; s itself
// when it holds none.
func (r *Redactor) Redact(s string) string {
	if r == nil || len(s) < r.shortest || len(r.secrets) == 0 {
		return s
	}
	spans := r.find(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(redactedText)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// redactJSON is redact for raw JSON (error data). A redaction that broke
// the JSON (a secret across a string's quotes) leaves the redacted text as
// one JSON string.
func (r *Redactor) RedactJSON(raw json.RawMessage) json.RawMessage {
	s := string(raw)
	clean := r.Redact(s)
	if clean == s {
		return raw
	}
	if json.Valid([]byte(clean)) {
		return json.RawMessage(clean)
	}
	q, _ := json.Marshal(clean)
	return q
}

type span struct{ start, end int }

// find returns the spans of s that hold a secret, in order and merged. It
// searches s lower-cased, then s with one layer of escapes decoded, and so
// on; at maps each layer's bytes back to the layer below, so a match
// anywhere is a span of whole escape sequences of s.
func (r *Redactor) find(s string) []span {
	var (
		spans []span
		layer = lowerASCII(s) // s itself, when it has no upper case
		maps  [][]int32
	)
	for depth := 0; ; depth++ {
		for _, sec := range r.secrets {
			for i := 0; i+len(sec) <= len(layer); {
				j := strings.Index(layer[i:], sec)
				if j < 0 {
					break
				}
				start := i + j
				spans = append(spans, span{origin(maps, start), origin(maps, start+len(sec))})
				i = start + 1
			}
		}
		// Most node text (hex data, plain messages) has no escape at all.
		if depth == redactDepth || !strings.ContainsAny(layer, `\%&`) {
			break
		}
		next, at, changed := unescapeLayer(layer)
		if !changed {
			break
		}
		layer = next
		maps = append(maps, at)
	}
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		if last := &merged[len(merged)-1]; sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// origin maps an offset of the top layer to an offset of the original text.
func origin(maps [][]int32, i int) int {
	for k := len(maps) - 1; k >= 0; k-- {
		i = int(maps[k][i])
	}
	return i
}

// unescapeLayer decodes one layer of JSON, percent and HTML escapes of
// ASCII characters, lower-casing what they decode to. at[i] is where
// byte i of out came from in b; at[len(out)] is len(b).
func unescapeLayer(b string) (out string, at []int32, changed bool) {
	o := make([]byte, 0, len(b))
	at = make([]int32, 0, len(b)+1)
	for i := 0; i < len(b); {
		c, n := unescapeAt(b, i)
		o = append(o, c)
		at = append(at, int32(i))
		i += n
		changed = changed || n > 1
	}
	return string(o), append(at, int32(len(b))), changed
}

// unescapeAt decodes the escape at b[i], if any: the byte it stands for and
// its length (1 for a byte that is not an escape).
func unescapeAt(b string, i int) (byte, int) {
	c := b[i]
	rest := b[i+1:]
	switch c {
	case '\\':
		if len(rest) == 0 {
			break
		}
		switch rest[0] {
		case '/', '\\', '"', '\'':
			return rest[0], 2
		case 'u':
			if len(rest) >= 5 {
				if v, ok := hexVal(rest[1:5]); ok && v < 0x80 {
					return lowerByte(byte(v)), 6
				}
			}
		case 'x':
			if len(rest) >= 3 {
				if v, ok := hexVal(rest[1:3]); ok && v < 0x80 {
					return lowerByte(byte(v)), 4
				}
			}
		}
	case '%':
		if len(rest) >= 2 {
			if v, ok := hexVal(rest[:2]); ok && v < 0x80 {
				return lowerByte(byte(v)), 3
			}
		}
	case '&':
		for _, e := range [...]struct {
			name string
			c    byte
		}{{"amp;", '&'}, {"quot;", '"'}, {"lt;", '<'}, {"gt;", '>'}, {"apos;", '\''}} {
			if strings.HasPrefix(rest, e.name) {
				return e.c, 1 + len(e.name)
			}
		}
		if len(rest) >= 3 && rest[0] == '#' {
			if v, n, ok := numericEntity(rest[1:]); ok && v < 0x80 {
				return lowerByte(byte(v)), 2 + n
			}
		}
	}
	return c, 1
}

// numericEntity reads "47;" or "x2f;" (lower-cased already): the value and
// the bytes read, the ';' included.
func numericEntity(b string) (v, n int, ok bool) {
	base := 10
	if len(b) > 0 && b[0] == 'x' {
		base, n = 16, 1
	}
	start := n
	for ; n < len(b) && n-start <= 6; n++ {
		c := b[n]
		d := -1
		switch {
		case '0' <= c && c <= '9':
			d = int(c - '0')
		case base == 16 && 'a' <= c && c <= 'f':
			d = int(c-'a') + 10
		case c == ';' && n > start:
			return v, n + 1, true
		}
		if d < 0 {
			return 0, 0, false
		}
		v = v*base + d
	}
	return 0, 0, false
}

func hexVal(b string) (int, bool) {
	v := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			v = v*16 + int(c-'0')
		case 'a' <= c|0x20 && c|0x20 <= 'f':
			v = v*16 + int(c|0x20-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lowerByte(b[j])
			}
			return string(b)
		}
	}
	return s
}

// ipRE finds IP addresses (and ports) in error texts: a dial error names
// the address a remote's host resolved to, which status output must not
// show either.
var ipRE = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9A-Fa-f:.]+\](?::\d+)?`)

// MaskAddrs replaces the IP addresses in text.
func MaskAddrs(text string) string {
	if !strings.ContainsAny(text, ".[") {
		return text
	}
	return ipRE.ReplaceAllString(text, "[address]")
}
