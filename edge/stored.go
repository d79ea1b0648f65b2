package edge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/venn-gateway/venn/keyspace"
)

// Tenants and API keys kept in Redis (auth.redis): an operator adds,
// changes and removes them with `venn tenants` while the cluster runs,
// and every replica applies them beside the file's. Each replica polls a
// version counter every auth.redis.refresh and, when it moved, reads both
// hashes again (keyspace.Scopes): a change is in force on every replica
// within one refresh. A key's secret is never stored: only its SHA-256.

// StoredScopes is auth.redis.
type StoredScopes struct {
	// Enabled adds the tenants and keys kept in Redis to the file's, and
	// requires a key or token of every caller even while there are none.
	Enabled bool `yaml:"enabled"`
	// Refresh is how often each replica looks for a change (default 1s):
	// the longest a change waits to apply.
	Refresh time.Duration `yaml:"refresh"`
	// Tag is the hash tag of the keys in Redis (default "scopes"): two
	// clusters sharing one Redis give theirs different tags.
	Tag string `yaml:"tag"`
}

// Defaults and bounds of auth.redis.
const (
	DefaultStoredRefresh = time.Second
	// MaxStoredTenants bounds the tenants kept in Redis: each is a label
	// value of the credit and usage series.
	MaxStoredTenants = 1000
	// MaxStoredKeys bounds the keys kept in Redis.
	MaxStoredKeys = 100_000
)

func (s StoredScopes) withDefaults() StoredScopes {
	if s.Refresh == 0 {
		s.Refresh = DefaultStoredRefresh
	}
	if s.Tag == "" {
		s.Tag = keyspace.DefaultScopesTag
	}
	return s
}

func (s StoredScopes) validate(p *problems) {
	if s.Refresh < 0 {
		p.add("auth.redis.refresh", "must be positive")
	}
	if s.Tag != "" && !keyNameRE.MatchString(s.Tag) {
		p.add("auth.redis.tag", "must match [A-Za-z0-9_.-]+, not %q", s.Tag)
	}
}

// Stored are the tenants and keys kept in Redis, sorted by name. A
// key's Key is empty and its KeySHA256 set.
type Stored struct {
	Tenants []Tenant
	Keys    []APIKey
	// Version is the counter they were read at.
	Version int64
}

// ScopeStore reads and writes the tenants and keys kept in Redis.
type ScopeStore struct {
	rdb  redis.Cmdable
	keys keyspace.Scopes
}

// NewScopeStore returns the store of tag's keys on rdb (tag "": the
// default). It does no I/O.
func NewScopeStore(rdb redis.Cmdable, tag string) *ScopeStore {
	if tag == "" {
		tag = keyspace.DefaultScopesTag
	}
	return &ScopeStore{rdb: rdb, keys: keyspace.ScopesKeys(tag)}
}

// Version is the counter every write bumps; 0 before the first.
func (s *ScopeStore) Version(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.keys.Version).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// Load reads every tenant and key at one version. An entry that does not
// decode is left out and named in bad, never quoted (it may hold a hash
// of a key, which is no secret, but its text is not venn's to show).
func (s *ScopeStore) Load(ctx context.Context) (st Stored, bad []error, err error) {
	pipe := s.rdb.TxPipeline()
	ver := pipe.Get(ctx, s.keys.Version)
	ts := pipe.HGetAll(ctx, s.keys.Tenants)
	ks := pipe.HGetAll(ctx, s.keys.Keys)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stored{}, nil, fmt.Errorf("stored scopes: %w", err)
	}
	st.Version, _ = ver.Int64()
	for name, y := range ts.Val() {
		var t Tenant
		if err := decodeStored(y, &t); err != nil || t.Name != name {
			bad = append(bad, fmt.Errorf("stored tenant %q: does not decode as a tenant of that name", name))
			continue
		}
		st.Tenants = append(st.Tenants, t)
	}
	for name, y := range ks.Val() {
		var k APIKey
		if err := decodeStored(y, &k); err != nil || k.Name != name || k.Key != "" {
			bad = append(bad, fmt.Errorf("stored key %q: does not decode as a hashed key of that name", name))
			continue
		}
		st.Keys = append(st.Keys, k)
	}
	slices.SortFunc(st.Tenants, func(a, b Tenant) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(st.Keys, func(a, b APIKey) int { return strings.Compare(a.Name, b.Name) })
	return st, bad, nil
}

// DecodeStored reads one entry as the config file spells it (YAML, or
// JSON with the same names), refusing fields it does not know.
func DecodeStored(text []byte, v any) error { return decodeStored(string(text), v) }

func decodeStored(text string, v any) error {
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// PutTenant adds or replaces tenant t. Check it first (CheckStored).
func (s *ScopeStore) PutTenant(ctx context.Context, t Tenant) error {
	return s.put(ctx, s.keys.Tenants, t.Name, t, MaxStoredTenants)
}

// PutKey adds or replaces key k, its secret stored as its SHA-256 only.
// Check it first (CheckStored).
func (s *ScopeStore) PutKey(ctx context.Context, k APIKey) error {
	k = HashKey(k)
	return s.put(ctx, s.keys.Keys, k.Name, k, MaxStoredKeys)
}

// HashKey returns k with its Key replaced by KeySHA256.
func HashKey(k APIKey) APIKey {
	if k.Key != "" {
		h := sha256.Sum256([]byte(k.Key))
		k.KeySHA256, k.Key = hex.EncodeToString(h[:]), ""
	}
	return k
}

func (s *ScopeStore) put(ctx context.Context, hash, name string, v any, most int64) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_ = enc.Close()
	n, err := s.rdb.HLen(ctx, hash).Result()
	if err != nil {
		return fmt.Errorf("stored scopes: %w", err)
	}
	if n >= most {
		if ok, _ := s.rdb.HExists(ctx, hash, name).Result(); !ok {
			return fmt.Errorf("stored scopes: at most %d of them", most)
		}
	}
	pipe := s.rdb.TxPipeline()
	pipe.HSet(ctx, hash, name, buf.String())
	pipe.Incr(ctx, s.keys.Version)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("stored scopes: %w", err)
	}
	return nil
}

// DeleteTenant removes tenant name; false when there was none.
func (s *ScopeStore) DeleteTenant(ctx context.Context, name string) (bool, error) {
	return s.del(ctx, s.keys.Tenants, name)
}

// DeleteKey removes key name; false when there was none.
func (s *ScopeStore) DeleteKey(ctx context.Context, name string) (bool, error) {
	return s.del(ctx, s.keys.Keys, name)
}

func (s *ScopeStore) del(ctx context.Context, hash, name string) (bool, error) {
	pipe := s.rdb.TxPipeline()
	n := pipe.HDel(ctx, hash, name)
	pipe.Incr(ctx, s.keys.Version)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("stored scopes: %w", err)
	}
	return n.Val() > 0, nil
}

// StoredProblem is why one stored entry is not applied.
type StoredProblem struct {
	Kind string // "tenant" or "key"
	Name string
	Err  error
}

func (p StoredProblem) Error() string { return fmt.Sprintf("stored %s %q: %v", p.Kind, p.Name, p.Err) }

// Merge returns base, a file's edge configuration, with the stored
// tenants and keys that check added: a stored entry is left out, and
// named in the problems, when the file has one of its name (the file's
// wins), when it is invalid as the file's would be, or when a key names
// a tenant there is none of. chains are the configured chains.
func Merge(base Config, st Stored, chains []string) (Config, []StoredProblem) {
	known := make(map[string]bool, len(chains))
	for _, ch := range chains {
		known[ch] = true
	}
	var probs []StoredProblem
	out := base
	out.Tenants = slices.Clone(base.Tenants)
	for _, t := range st.Tenants {
		if base.hasTenant(t.Name) {
			probs = append(probs, StoredProblem{"tenant", t.Name, errors.New("the config file has a tenant of that name, which wins")})
			continue
		}
		var p problems
		Config{Tenants: []Tenant{t}}.validateTenants(&p, known)
		if len(p) > 0 {
			probs = append(probs, StoredProblem{"tenant", t.Name, errors.Join(p...)})
			continue
		}
		out.Tenants = append(out.Tenants, t)
	}
	out.Auth.Keys = slices.Clone(base.Auth.Keys)
	names := make(map[string]bool, len(base.Auth.Keys)+len(st.Keys))
	hashes := make(map[[sha256.Size]byte]bool, len(base.Auth.Keys)+len(st.Keys))
	for _, k := range base.Auth.Keys {
		names[k.Name] = true
		if h, ok := keyHash(k); ok {
			hashes[h] = true
		}
	}
	for _, k := range st.Keys {
		if err := checkStoredKey(out, k, known, names, hashes); err != nil {
			probs = append(probs, StoredProblem{"key", k.Name, err})
			continue
		}
		out.Auth.Keys = append(out.Auth.Keys, k)
	}
	return out, probs
}

// checkStoredKey checks k as one more key of c, whose keys' names and
// hashes are given, and adds k's to them when it passes.
func checkStoredKey(c Config, k APIKey, chains, names map[string]bool, hashes map[[sha256.Size]byte]bool) error {
	if k.Key != "" {
		return errors.New("a stored key holds its SHA-256 only")
	}
	c.Auth.Keys = []APIKey{k}
	var p problems
	c.validateKeys(&p, chains)
	errs := make([]error, 0, len(p))
	for _, e := range p {
		errs = append(errs, errors.New(strings.TrimPrefix(e.Error(), "auth.keys[0].")))
	}
	h, _ := keyHash(k)
	switch {
	case len(errs) > 0:
	case names[k.Name]:
		errs = append(errs, errors.New("the config file has a key of that name, which wins"))
	case hashes[h]:
		errs = append(errs, errors.New("another key has the same secret"))
	default:
		names[k.Name], hashes[h] = true, true
	}
	return errors.Join(errs...)
}

// CheckStored reports why the tenants and keys of st, with put added
// (replacing the entry of its name), would not all apply over base: the
// problems of put's entry only, so that an operator's change is refused
// before it is written. put is a Tenant or an APIKey (hashed or not).
func CheckStored(base Config, st Stored, put any, chains []string) error {
	var kind, name string
	switch v := put.(type) {
	case Tenant:
		kind, name = "tenant", v.Name
		st.Tenants = slices.DeleteFunc(slices.Clone(st.Tenants), func(t Tenant) bool { return t.Name == v.Name })
		st.Tenants = append(st.Tenants, v)
	case APIKey:
		var p problems // the secret's own checks, before it is hashed
		checkSecret(&p, "key", v, map[[sha256.Size]byte]int{}, 0)
		if len(p) > 0 {
			return errors.Join(p...)
		}
		v = HashKey(v)
		kind, name = "key", v.Name
		st.Keys = slices.DeleteFunc(slices.Clone(st.Keys), func(k APIKey) bool { return k.Name == v.Name })
		st.Keys = append(st.Keys, v)
	default:
		return fmt.Errorf("not a tenant or key: %T", put)
	}
	if !keyNameRE.MatchString(name) {
		return fmt.Errorf("name: must match [A-Za-z0-9_.-]+, not %q", name)
	}
	_, probs := Merge(base.WithDefaults(), st, chains)
	var errs []error
	for _, p := range probs {
		if p.Kind == kind && p.Name == name {
			errs = append(errs, p.Err)
		}
	}
	return errors.Join(errs...)
}
