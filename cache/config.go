package cache

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/venn-gateway/venn/evm"
)

// Defaults of a chain's cache section.
const (
	DefaultMemoryBytes       = 64 << 20
	DefaultMaxEntryBytes     = 1 << 20
	DefaultSettledTTL        = 24 * time.Hour
	DefaultPostgresRetention = 30 * 24 * time.Hour
	DefaultClaimHold         = 5 * time.Second
	// DefaultTierTimeout bounds one Redis or Postgres operation of a
	// call: a store on the same network answers in a few milliseconds,
	// and a call whose tier stalls waits this long at most before it is a
	// miss.
	DefaultTierTimeout = 250 * time.Millisecond
	// DefaultRecentBlocks is how many block times a near-head entry is
	// kept: past that its block is settled and asked by number, or gone.
	DefaultRecentBlocks = 4
	// minRecentTTL is recent_ttl's default floor, for chains of very short
	// blocks.
	minRecentTTL = 2 * time.Second
	// minMemoryBytes: below this the memory tier holds too few answers to
	// be worth its bookkeeping.
	minMemoryBytes = 64 << 10
)

// Defaults of PostgresOptions.
const (
	// DefaultPostgresReadTimeout bounds one Get: the tier is asked on a
	// miss of memory and Redis, and a Postgres that stalls must cost the
	// call little before it goes upstream. The app sets it to the chain's
	// tier_timeout, the cache's own bound on a tier call.
	DefaultPostgresReadTimeout = 200 * time.Millisecond
	// DefaultPostgresWriteTimeout bounds one Set.
	DefaultPostgresWriteTimeout = 2 * time.Second
	// DefaultPostgresMaxEntryBytes caps one value: traces of busy blocks
	// run to megabytes, and the answers worth keeping durably are those.
	DefaultPostgresMaxEntryBytes = 16 << 20
	// DefaultPostgresMaxAge and DefaultPostgresMaxRows are the retention:
	// a row older than the age, or past the chain's newest MaxRows, is
	// pruned.
	DefaultPostgresMaxAge  = 30 * 24 * time.Hour
	DefaultPostgresMaxRows = 1_000_000
	// DefaultPruneInterval is how often Run prunes.
	DefaultPruneInterval = time.Minute
	// DefaultPruneBatch bounds the rows one DELETE removes, so that a
	// prune never holds locks on many rows or runs long.
	DefaultPruneBatch = 5000
)

// DefaultMethods are the methods cached unless a chain's methods.remove
// says otherwise: state at a block and traces of a block. Traces (of
// debug_trace* and trace_*) are cached only by hash or settled: a
// near-head trace is rarely asked twice. Traces keyed by a transaction
// hash are not here: a reorg can include the transaction in another
// block, and the key does not say which.
var DefaultMethods = []string{
	"eth_call", "eth_getBalance", "eth_getCode", "eth_getStorageAt", "eth_getTransactionCount",
	"eth_getProof", "eth_createAccessList", "eth_getBlockReceipts",
	"debug_traceCall", "debug_traceBlockByNumber", "debug_traceBlockByHash",
	"trace_block", "trace_replayBlockTransactions", "trace_call",
}

// DefaultPostgresMethods are the methods whose settled answers the Postgres
// tier keeps: the expensive ones.
var DefaultPostgresMethods = []string{"debug_trace*", "trace_*", "eth_getProof"}

// Config is a chain's response cache, the chains[].cache section of the
// configuration file, and that section's YAML schema.
type Config struct {
	// Enabled turns the cache on; default on.
	Enabled *bool `yaml:"enabled"`
	// Methods changes the cached set: add (exact names of methods with a
	// block param venn knows), remove and never (names, or prefixes ending
	// in _ or *). never wins over everything.
	Methods Methods `yaml:"methods"`
	// MemoryBytes bounds the memory tier, keys and bookkeeping included.
	MemoryBytes int64 `yaml:"memory_bytes"`
	// Redis keeps answers in the cluster's Redis; default on when
	// redis.url is set.
	Redis *bool `yaml:"redis"`
	// Postgres keeps settled answers of PostgresMethods in the postgres
	// database for PostgresRetention; default off.
	Postgres          bool          `yaml:"postgres"`
	PostgresMethods   []string      `yaml:"postgres_methods"`
	PostgresRetention time.Duration `yaml:"postgres_retention"`
	// PostgresMaxRows bounds the chain's rows in the Postgres tier: past
	// it, the oldest are pruned.
	PostgresMaxRows int64 `yaml:"postgres_max_rows"`
	// SettledTTL is how long Redis keeps a settled answer.
	SettledTTL time.Duration `yaml:"settled_ttl"`
	// RecentTTL is how long any tier keeps a near-head answer (keyed by
	// its block's hash); default a few block times.
	RecentTTL time.Duration `yaml:"recent_ttl"`
	// MaxEntryBytes: larger answers are served, not stored.
	MaxEntryBytes int `yaml:"max_entry_bytes"`
	// CacheReverts says where a revert (the caller's own, deterministic
	// error at a fixed block) is stored like an answer.
	CacheReverts Reverts `yaml:"cache_reverts"`
	// ClaimHold is the longest a replica waits for another replica that
	// claimed the same miss before asking upstream itself: a claim ends
	// with its fetch, so this bounds only a claimant that died mid-fetch.
	ClaimHold time.Duration `yaml:"claim_hold"`
	// TierTimeout bounds one operation of the Redis and Postgres tiers (a
	// lookup, a store, a claim): past it the operation fails, counted, and
	// the call goes on as a miss. Raise it where the stores are far (or
	// the machine is loaded) and a few ms is not what they take.
	TierTimeout time.Duration `yaml:"tier_timeout"`
	// Verify says what a provable state answer (eth_getBalance,
	// eth_getTransactionCount, eth_getCode, eth_getStorageAt, eth_getProof)
	// is checked against before it is stored: VerifyNone (the default), or
	// VerifyProofs, the account's eth_getProof verified against the state
	// root of the block the cluster holds (proof.go).
	Verify string `yaml:"verify"`
}

// The values of cache.verify.
const (
	VerifyNone   = "none"
	VerifyProofs = "proofs"
)

// Methods are a chain's changes to DefaultMethods.
type Methods struct {
	Add    []string `yaml:"add"`
	Remove []string `yaml:"remove"`
	Never  []string `yaml:"never"`
}

// Reverts says which reverts are cached: at settled blocks (default on)
// and near the head (default off: a revert there is often a race with a
// transaction in the next block, asked again at once).
type Reverts struct {
	Settled *bool `yaml:"settled"`
	Recent  *bool `yaml:"recent"`
}

// WithDefaults fills c's zero fields: blockTime is the chain's block time
// (recent_ttl's unit), redis whether the process has a Redis. It is the
// only place the section's defaults are decided.
func (c Config) WithDefaults(blockTime time.Duration, redis bool) Config {
	c.Enabled = orBool(c.Enabled, true)
	c.Redis = orBool(c.Redis, redis)
	c.CacheReverts.Settled = orBool(c.CacheReverts.Settled, true)
	c.CacheReverts.Recent = orBool(c.CacheReverts.Recent, false)
	c.MemoryBytes = cmp.Or(c.MemoryBytes, DefaultMemoryBytes)
	c.MaxEntryBytes = cmp.Or(c.MaxEntryBytes, min(DefaultMaxEntryBytes, int(c.MemoryBytes/16)))
	c.SettledTTL = cmp.Or(c.SettledTTL, DefaultSettledTTL)
	c.RecentTTL = cmp.Or(c.RecentTTL, max(DefaultRecentBlocks*blockTime, minRecentTTL))
	if c.PostgresMethods == nil {
		c.PostgresMethods = DefaultPostgresMethods
	}
	c.PostgresRetention = cmp.Or(c.PostgresRetention, DefaultPostgresRetention)
	c.PostgresMaxRows = cmp.Or(c.PostgresMaxRows, DefaultPostgresMaxRows)
	c.ClaimHold = cmp.Or(c.ClaimHold, DefaultClaimHold)
	c.TierTimeout = cmp.Or(c.TierTimeout, DefaultTierTimeout)
	c.Verify = cmp.Or(c.Verify, VerifyNone)
	return c
}

func orBool(p *bool, def bool) *bool {
	if p != nil {
		return p
	}
	return &def
}

// Validate reports every problem of a defaulted c, each naming its field
// (memory_bytes, methods.add[0]).
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.MemoryBytes < minMemoryBytes {
		add("memory_bytes", "must be at least %d", minMemoryBytes)
	}
	if c.MaxEntryBytes <= 0 || int64(c.MaxEntryBytes) > c.MemoryBytes/4 {
		add("max_entry_bytes", "must be positive and at most a quarter of memory_bytes")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"settled_ttl", c.SettledTTL}, {"recent_ttl", c.RecentTTL},
		{"postgres_retention", c.PostgresRetention}, {"claim_hold", c.ClaimHold},
		{"tier_timeout", c.TierTimeout}} {
		if d.v <= 0 {
			add(d.name, "must be positive")
		}
	}
	if c.PostgresMaxRows <= 0 {
		add("postgres_max_rows", "must be positive")
	}
	if c.Verify != VerifyNone && c.Verify != VerifyProofs {
		add("verify", "must be %q or %q, not %q", VerifyNone, VerifyProofs, c.Verify)
	}
	if c.RecentTTL > c.SettledTTL {
		add("recent_ttl", "must not exceed settled_ttl")
	}
	for i, m := range c.Methods.Add {
		if err := cacheable(m); err != nil {
			add(fmt.Sprintf("methods.add[%d]", i), "%v", err)
		}
	}
	lists := []struct {
		name string
		v    []string
	}{{"methods.remove", c.Methods.Remove}, {"methods.never", c.Methods.Never}, {"postgres_methods", c.PostgresMethods}}
	for _, l := range lists {
		for i, m := range l.v {
			if m == "" || m == "*" || m == "_" {
				add(fmt.Sprintf("%s[%d]", l.name, i), "must name a method or a prefix, not %q", m)
			}
		}
	}
	return errors.Join(errs...)
}

// cacheable says why method cannot be added to the cached set: its answer
// must be fixed by a block param venn knows where to find.
func cacheable(method string) error {
	m := evm.Lookup(method)
	switch {
	case method == "":
		return errors.New("must name a method")
	case m.Class != evm.ClassRead:
		return fmt.Errorf("%s is not a plain read", method)
	case m.Block < 0:
		return fmt.Errorf("%s has no block parameter venn knows: its answer is the node's of the moment", method)
	}
	return nil
}

// On reports whether the cache is enabled.
func (c Config) On() bool { return c.Enabled == nil || *c.Enabled }
