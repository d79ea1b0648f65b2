package remotes

import (
	"fmt"
	"time"

	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/consensus"
	"github.com/venn-gateway/venn/remotes/fielderr"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/relay"
	"github.com/venn-gateway/venn/remotes/score"
	"github.com/venn-gateway/venn/remotes/settings"
	"github.com/venn-gateway/venn/remotes/wire"
	"github.com/venn-gateway/venn/tracing"
)

// Defaults for one chain's pool.
const (
	// DefaultBlockTime is the block time assumed until the chain's block
	// timestamps have told it (PoolConfig.BlockTime 0).
	DefaultBlockTime          = 12 * time.Second
	DefaultMaxLag             = 5
	DefaultCallDeadline       = 30 * time.Second
	DefaultMaxAttempts        = 4
	DefaultGetLogsConcurrency = 4
	DefaultGetLogsMaxParts    = 1000
	DefaultBroadcastFanout    = 3
	// DefaultProbeEvery: each remote's oldest blocks are probed again this
	// often (avail_probe.go); providers prune and change plans slowly.
	DefaultProbeEvery = 6 * time.Hour
	// DefaultBreakerFailures and DefaultBreakerCooldown: a remote's
	// breaker opens after this many consecutive faults, for this long.
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 10 * time.Second
)

// DefaultPendingPollInterval is how often a pending-transaction filter is
// polled (relay.DefaultPollInterval).
const DefaultPendingPollInterval = relay.DefaultPollInterval

// DefaultChainRecheck is how often a remote's chain id is asked again.
const DefaultChainRecheck = health.DefaultChainRecheck

// Bounds of a chain's pool settings.
const (
	// maxGetLogsParts bounds getlogs_max_parts: one split call keeps a
	// slot per part, so the setting is also a memory bound.
	maxGetLogsParts = 100_000
	// minChainRecheck bounds chain_recheck from below: each check is a
	// call to every remote of the chain, and providers bill them.
	minChainRecheck = 100 * time.Millisecond
	// maxPendingPollInterval bounds pending_poll_interval: nodes drop a
	// filter that is not polled for a while (geth after 5 minutes).
	maxPendingPollInterval = time.Minute
	// minProbeEvery bounds availability.probe_every from below: a probe is
	// a dozen calls or more to each remote, billed by providers.
	minProbeEvery = time.Minute
)

// PoolConfig is one chain's pool, and the YAML schema of the chain-level
// settings it reads: the application inlines it into a chain of the
// configuration file (chains[].call_deadline, chains[].breaker.failures),
// the chain's name and id and the remotes list being the chain's own.
// WithDefaults fills it, Validate names each problem's field.
type PoolConfig struct {
	Chain   string `yaml:"-"` // the chain's name
	ChainID uint64 `yaml:"-"`
	// BlockTime sets the head polling cadence; 0 learns it from the block
	// timestamps (chainhead.go). Remotes with a ws url are polled only
	// while their newHeads are silent.
	BlockTime time.Duration `yaml:"block_time"`
	// ChainRecheck is how often each remote's chain id is asked again
	// (chaincheck.go).
	ChainRecheck time.Duration `yaml:"chain_recheck"`
	// MaxLag: a remote more than this many blocks behind the best head leaves
	// rotation until it catches up.
	MaxLag uint64 `yaml:"max_lag"`
	// CallDeadline bounds one client call across every failover attempt.
	CallDeadline time.Duration `yaml:"call_deadline"`
	// MaxAttempts bounds the remotes tried for one call.
	MaxAttempts int `yaml:"max_attempts"`
	// GetLogsConcurrency bounds the parts of a split eth_getLogs in flight.
	GetLogsConcurrency int `yaml:"getlogs_concurrency"`
	// GetLogsMaxParts bounds the upstream calls one split eth_getLogs may
	// make (nested splits included); a range that needs more is refused
	// with -32052 before any call is sent.
	GetLogsMaxParts int `yaml:"getlogs_max_parts"`
	// BroadcastFanout: eth_sendRawTransaction goes to this many remotes at once.
	BroadcastFanout int `yaml:"broadcast_fanout"`
	// PendingPollInterval is how often the pending-transaction filter that
	// serves newPendingTransactions without a WebSocket remote is polled
	// (remotes/relay).
	PendingPollInterval time.Duration `yaml:"pending_poll_interval"`
	Breaker             BreakerConfig `yaml:"breaker"`
	// Consensus puts the listed methods to a vote among several remotes
	// (consensus.go); no method is voted on unless configured.
	Consensus []ConsensusRule `yaml:"consensus"`
	// Cordon takes a remote that keeps misbehaving out of rotation
	// (misbehave.go).
	Cordon CordonConfig `yaml:"cordon"`
	// MisbehaviourLog, when set, is a file each misbehaviour is appended to
	// as one JSON line.
	MisbehaviourLog string `yaml:"misbehaviour_log"`
	// Hedge sends slow reads of the listed methods to a second remote
	// (hedge.go); no groups, no hedging.
	Hedge HedgeConfig `yaml:"hedge"`
	// Scoring orders the remotes of a tier (score.go).
	Scoring score.Config `yaml:"scoring"`
	// ForwardHeaders and ForwardClientIP are every remote's of the chain,
	// besides each remote's own (passthrough.go).
	ForwardHeaders  []string `yaml:"forward_headers"`
	ForwardClientIP bool     `yaml:"forward_client_ip"`
	// TxRoutes send transactions and bundler calls to named groups of
	// remotes instead of the pool (side.go).
	TxRoutes []TxRoute `yaml:"transaction_routes"`
	// Availability learns the oldest block each remote serves (avail.go).
	Availability AvailabilityConfig `yaml:"availability"`
	// Replies bounds the bytes of replies being read (replies.go). The app
	// gives every chain's pool the same one; nil: the pool has its own of
	// jrpc.DefaultReplyBytesInFlight.
	Replies *wire.ReplyBudget `yaml:"-"`
	// Tracer traces each send of a traced call (trace.go) and, when it
	// propagates, sends the trace context to HTTP remotes; nil: off.
	Tracer *tracing.Tracer `yaml:"-"`
	// Budgets keeps the remotes' budget counters for the cluster
	// (redisstore.NewBudgets); nil: each process counts its own.
	Budgets budget.Store `yaml:"-"`
	// OnDistrust is told of each Distrust (distrust.go); nil: nobody. It
	// is called on the goroutine that made the finding (a chain check, a
	// vote, a verified call): it must not block.
	OnDistrust func(Distrust) `yaml:"-"`
}

// AvailabilityConfig is how a chain learns its remotes' windows of old
// data: by probing at start and every ProbeEvery (unless Probe is false),
// and from answers. A remote's archive or max_block_lookback wins over both.
type AvailabilityConfig struct {
	// Probe, default true; false learns the windows from answers only.
	Probe      *bool         `yaml:"probe"`
	ProbeEvery time.Duration `yaml:"probe_every"`
	// Share, when set, shares the probes among a cluster's replicas, so
	// that one probes each remote; the app gives one when Redis is set.
	Share AvailShare `yaml:"-"`
}

// probing reports whether the probe runs.
func (c AvailabilityConfig) probing() bool { return c.Probe == nil || *c.Probe }

// BreakerConfig opens a remote's breaker after Failures consecutive
// faults, for Cooldown, after which one probe call is let through.
type BreakerConfig struct {
	Failures int           `yaml:"failures"`
	Cooldown time.Duration `yaml:"cooldown"`
}

// CordonConfig takes a remote out of rotation for Period after Strikes
// misbehaviours within Within.
type CordonConfig struct {
	Strikes int           `yaml:"strikes"`
	Within  time.Duration `yaml:"within"`
	Period  time.Duration `yaml:"period"`
}

// WithDefaults returns c with every zero field at its documented default,
// for a chain of nRemotes remotes. BlockTime stays 0 unless set: the pool
// learns it from block timestamps (DefaultBlockTime until they have told
// it). It is the only place the pool's defaults are decided.
func (c PoolConfig) WithDefaults(nRemotes int) PoolConfig {
	setDefault(&c.ChainRecheck, DefaultChainRecheck)
	setDefault(&c.MaxLag, DefaultMaxLag)
	setDefault(&c.CallDeadline, DefaultCallDeadline)
	setDefault(&c.MaxAttempts, DefaultMaxAttempts)
	setDefault(&c.GetLogsConcurrency, DefaultGetLogsConcurrency)
	setDefault(&c.GetLogsMaxParts, DefaultGetLogsMaxParts)
	setDefault(&c.BroadcastFanout, DefaultBroadcastFanout)
	setDefault(&c.PendingPollInterval, DefaultPendingPollInterval)
	setDefault(&c.Breaker.Failures, DefaultBreakerFailures)
	setDefault(&c.Breaker.Cooldown, DefaultBreakerCooldown)
	setDefault(&c.Cordon.Strikes, DefaultCordonStrikes)
	setDefault(&c.Cordon.Within, DefaultCordonWithin)
	setDefault(&c.Cordon.Period, DefaultCordonPeriod)
	setDefault(&c.Availability.ProbeEvery, DefaultProbeEvery)
	c.Consensus = consensus.Defaults(c.Consensus, nRemotes)
	c.Hedge = c.Hedge.WithDefaults()
	c.Scoring = c.Scoring.WithDefaults()
	return c
}

// Validate reports every problem of a defaulted c and of the chain's
// defaulted remotes rs, each naming its field as the chain's section of
// the file spells it (call_deadline, hedge.groups[0].max,
// remotes[1].timeout). No message quotes a URL or header value.
func (c PoolConfig) Validate(rs []Config) error {
	var p fielderr.List
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"block_time", c.BlockTime}, {"call_deadline", c.CallDeadline},
		{"pending_poll_interval", c.PendingPollInterval}, {"breaker.cooldown", c.Breaker.Cooldown},
		{"cordon.within", c.Cordon.Within}, {"cordon.period", c.Cordon.Period},
	} {
		p.Negative(d.name, d.v < 0)
	}
	if c.PendingPollInterval > maxPendingPollInterval {
		// Nodes drop a filter nobody polls (geth after 5 minutes).
		p.Add("pending_poll_interval", "must be at most %v, not %v", maxPendingPollInterval, c.PendingPollInterval)
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"max_attempts", c.MaxAttempts}, {"getlogs_concurrency", c.GetLogsConcurrency},
		{"getlogs_max_parts", c.GetLogsMaxParts}, {"broadcast_fanout", c.BroadcastFanout},
		{"breaker.failures", c.Breaker.Failures}, {"cordon.strikes", c.Cordon.Strikes},
	} {
		p.Negative(n.name, n.v < 0)
	}
	if c.ChainRecheck < 0 {
		p.Add("chain_recheck", "must be positive")
	} else if c.ChainRecheck > 0 && c.ChainRecheck < minChainRecheck {
		p.Add("chain_recheck", "must be at least %v", minChainRecheck)
	}
	if e := c.Availability.ProbeEvery; e < minProbeEvery {
		p.Add("availability.probe_every", "must be at least %v", minProbeEvery)
	}
	if c.GetLogsMaxParts > maxGetLogsParts {
		p.Add("getlogs_max_parts", "must be at most %d", maxGetLogsParts)
	}
	p.Under("", consensus.Validate(c.Consensus, len(rs), TierFallback))
	p.Under("hedge", c.Hedge.Validate(c.MaxAttempts))
	p.Under("scoring", c.Scoring.Validate())
	settings.ValidateForward(&p, c.ForwardHeaders)
	c.validateRemotes(&p, rs)
	c.validateRoutes(&p, rs)
	return p.Err()
}

// validateRemotes checks the chain's remotes: each on its own, their
// names unique, their timeouts inside the call deadline.
func (c PoolConfig) validateRemotes(p *fielderr.List, rs []Config) {
	if len(rs) == 0 {
		p.Add("remotes", "at least one remote is required")
	}
	seen := make(map[string]int, len(rs))
	for j, r := range rs {
		path := fmt.Sprintf("remotes[%d]", j)
		if first, dup := seen[r.Name]; dup && r.Name != "" {
			p.Add(path+".name", "%q is already used by remotes[%d]", r.Name, first)
		} else {
			seen[r.Name] = j
		}
		p.Under(path, r.Validate())
		if r.Timeout > 0 && c.CallDeadline > 0 && r.Timeout >= c.CallDeadline {
			// Only an attempt that hits its own timeout counts against the
			// remote; one cut by call_deadline does not. A timeout that can
			// never fire would let a hung remote stay in rotation.
			p.Add(path+".timeout", "must be shorter than the chain's call_deadline (%v)", c.CallDeadline)
		}
	}
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}
