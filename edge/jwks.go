package edge

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Defaults of a JWKS.
const (
	// DefaultJWKSRefresh is how often the key set is fetched again, so that
	// a key the issuer removed stops verifying tokens within it.
	DefaultJWKSRefresh = 5 * time.Minute
	// DefaultJWKSMinRefresh spaces the fetches a token with an unknown key
	// ID triggers: a rotated-in key is picked up at its first token, and a
	// stream of made-up key IDs costs the issuer one fetch per period.
	DefaultJWKSMinRefresh = 30 * time.Second
	// jwksFetchTimeout bounds one fetch; a call waiting for one waits at
	// most this.
	jwksFetchTimeout = 5 * time.Second
	// maxJWKSBytes bounds a key set's document.
	maxJWKSBytes = 1 << 20
)

// JWKSOptions configure a JWKS; zero fields take defaults.
type JWKSOptions struct {
	Refresh    time.Duration // default DefaultJWKSRefresh
	MinRefresh time.Duration // default DefaultJWKSMinRefresh
	Client     *http.Client  // default: one with a 5 s timeout
	Logger     *slog.Logger  // fetch failures (warn); nil discards
}

// JWKS is the public keys of a JWT issuer, fetched from its JWKS URL and
// kept in memory: fetched again every Refresh (a removed key stops
// verifying), and at once, at most every MinRefresh, when a token names a
// key ID it does not hold (a rotated-in key verifies from its first
// token). Lookups never wait for the network except that one fetch, and
// concurrent lookups of unknown keys share it. Start runs the periodic
// refresh; without it keys are fetched on demand only.
type JWKS struct {
	url  string
	opts JWKSOptions
	log  *slog.Logger

	keys atomic.Pointer[jwkSet]

	fetchMu   sync.Mutex   // one fetch at a time
	lastFetch atomic.Int64 // unix ns of the last fetch's start, 0: none yet

	cancel context.CancelFunc // ends the refresh; nil before Start
	done   chan struct{}
}

// jwkSet is one fetched key set, replaced whole.
type jwkSet struct {
	byKID map[string][]jose.JSONWebKey
	all   []jose.JSONWebKey
	gen   uint64 // counts the sets that differed from the one before
	raw   string
}

// NewJWKS returns the key set at url. It does no I/O.
func NewJWKS(url string, opts JWKSOptions) *JWKS {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultJWKSRefresh
	}
	if opts.MinRefresh <= 0 {
		opts.MinRefresh = DefaultJWKSMinRefresh
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: jwksFetchTimeout}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &JWKS{url: url, opts: opts, log: log}
	j.keys.Store(&jwkSet{})
	return j
}

// URL is the key set's address (an issuer's public document, no secret).
func (j *JWKS) URL() string { return j.url }

// Start fetches the key set (a failure is logged, not returned: tokens are
// refused until a fetch succeeds) and refreshes it every Refresh until
// Stop.
func (j *JWKS) Start(ctx context.Context) {
	if j.cancel != nil {
		return
	}
	if err := j.Fetch(ctx); err != nil {
		j.log.Warn("jwt: fetch JWKS at start", "err", err)
	}
	var loopCtx context.Context
	loopCtx, j.cancel = context.WithCancel(context.Background())
	j.done = make(chan struct{})
	go j.loop(loopCtx)
}

// Stop ends the refresh, a fetch in flight too, and waits for it.
func (j *JWKS) Stop() {
	if j.cancel == nil {
		return
	}
	j.cancel()
	<-j.done
	j.cancel = nil
}

func (j *JWKS) loop(ctx context.Context) {
	defer close(j.done)
	t := time.NewTicker(j.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := j.Fetch(ctx); err != nil && ctx.Err() == nil {
			j.log.Warn("jwt: refresh JWKS; keeping the keys fetched before", "err", err)
		}
	}
}

// Generation changes whenever the key set does: a token verified under
// another generation is verified again.
func (j *JWKS) Generation() uint64 { return j.keys.Load().gen }

// Fetch gets the key set now and puts it in force. A failed fetch keeps
// the set in force.
func (j *JWKS) Fetch(ctx context.Context) error {
	j.fetchMu.Lock()
	defer j.fetchMu.Unlock()
	return j.fetchLocked(ctx)
}

func (j *JWKS) fetchLocked(ctx context.Context) error {
	j.lastFetch.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := j.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("jwks: %w", redactURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jwks: HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("jwks: read: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return fmt.Errorf("jwks: document over %d bytes", maxJWKSBytes)
	}
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	set := &jwkSet{byKID: make(map[string][]jose.JSONWebKey, len(doc.Keys)), raw: string(body)}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		// A key of a type this verifier does not know (or a private or
		// symmetric one) is skipped, not fatal: issuers list several.
		if err := k.UnmarshalJSON(raw); err != nil || !k.IsPublic() || k.Use == "enc" {
			continue
		}
		set.all = append(set.all, k)
		set.byKID[k.KeyID] = append(set.byKID[k.KeyID], k)
	}
	old := j.keys.Load()
	set.gen = old.gen
	if set.raw != old.raw {
		set.gen++
	}
	j.keys.Store(set)
	return nil
}

// errUnknownKey is a token's key ID the key set does not hold, even after
// a fetch.
var errUnknownKey = errors.New("no key with the token's key ID")

// lookup returns the keys a token with key ID kid ("" for none) may be
// signed with, fetching the set once when kid is unknown and the last
// fetch is older than MinRefresh.
func (j *JWKS) lookup(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	if ks := j.keys.Load().find(kid); len(ks) > 0 {
		return ks, nil
	}
	if kid == "" || time.Since(time.Unix(0, j.lastFetch.Load())) < j.opts.MinRefresh {
		return nil, errUnknownKey
	}
	j.fetchMu.Lock()
	// Another lookup may have fetched while this one waited.
	if time.Since(time.Unix(0, j.lastFetch.Load())) >= j.opts.MinRefresh {
		if err := j.fetchLocked(ctx); err != nil {
			j.log.Warn("jwt: fetch JWKS for an unknown key ID", "err", err)
		}
	}
	j.fetchMu.Unlock()
	if ks := j.keys.Load().find(kid); len(ks) > 0 {
		return ks, nil
	}
	return nil, errUnknownKey
}

func (s *jwkSet) find(kid string) []jose.JSONWebKey {
	if kid == "" {
		return s.all
	}
	return s.byKID[kid]
}

// publicKey is k's key as golang-jwt verifies with it.
func publicKey(k jose.JSONWebKey) crypto.PublicKey { return k.Key }

// redactURL drops the URL from a client error: a JWKS URL may carry a
// token of its own.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
