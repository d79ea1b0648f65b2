package remotes

import (
	"fmt"
	"time"
)

// Tier orders remotes: primary first, then secondary; fallback only when
// nothing else can serve.
type Tier uint8

const (
	TierPrimary Tier = iota
	TierSecondary
	TierFallback
)

func (t Tier) String() string {
	switch t {
	case TierPrimary:
		return "primary"
	case TierSecondary:
		return "secondary"
	case TierFallback:
		return "fallback"
	}
	return "unknown"
}

// ParseTier reads a tier name as written in config; "" is primary.
func ParseTier(s string) (Tier, error) {
	switch s {
	case "", "primary":
		return TierPrimary, nil
	case "secondary":
		return TierSecondary, nil
	case "fallback":
		return TierFallback, nil
	}
	return 0, fmt.Errorf("unknown tier %q (want primary, secondary or fallback)", s)
}

// Defaults for one remote.
const (
	DefaultRemoteTimeout     = 10 * time.Second
	DefaultMaxInFlight       = 256
	DefaultBreakerFailures   = 5
	DefaultBreakerCooldown   = 10 * time.Second
	DefaultMaxLogsRangeSplit = 0 // no cap until a remote says so
)

// Config is one upstream endpoint. URL and WSURL may carry API keys: they are
// used to dial and nowhere else.
type Config struct {
	Name string
	URL  string // http(s):// or ws(s)://
	// WSURL is an optional ws(s):// URL newHeads are followed over (and
	// subscriptions relayed); without it a ws(s) URL serves for both.
	WSURL string
	Tier  Tier

	Timeout     time.Duration // per attempt
	MaxInFlight int           // concurrent calls; over it the remote is Full
	RateLimit   float64       // requests per second; 0 = unlimited
	RateBurst   int
	// Allow, when set, is the only methods sent to this remote; Deny is never
	// sent. Entries ending in "_" or "*" match a prefix (e.g. "debug_").
	Allow   []string
	Deny    []string
	Headers map[string]string
	// MaxLogsRange caps the block span of one eth_getLogs sent here; larger
	// requests are split. 0 = no cap configured.
	MaxLogsRange     uint64
	MaxResponseBytes int64
}

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
)

// PoolConfig is one chain's pool.
type PoolConfig struct {
	Chain   string
	ChainID uint64
	// BlockTime sets the head polling cadence; 0 learns it from the block
	// timestamps (chainhead.go). Remotes with a ws url are polled only
	// while their newHeads are silent.
	BlockTime time.Duration
	// ChainRecheck is how often each remote's chain id is asked again
	// (chaincheck.go); 0: DefaultChainRecheck.
	ChainRecheck time.Duration
	// MaxLag: a remote more than this many blocks behind the best head leaves
	// rotation until it catches up.
	MaxLag uint64
	// CallDeadline bounds one client call across every failover attempt.
	CallDeadline time.Duration
	// MaxAttempts bounds the remotes tried for one call.
	MaxAttempts int
	// GetLogsConcurrency bounds the parts of a split eth_getLogs in flight.
	GetLogsConcurrency int
	// GetLogsMaxParts bounds the upstream calls one split eth_getLogs may
	// make (nested splits included); a range that needs more is refused
	// with -32052 before any call is sent.
	GetLogsMaxParts int
	// BroadcastFanout: eth_sendRawTransaction goes to this many remotes at once.
	BroadcastFanout int
	// BreakerFailures consecutive faults open a remote's breaker for
	// BreakerCooldown, after which one probe call is let through.
	BreakerFailures int
	BreakerCooldown time.Duration
	// Hedge sends slow reads of the listed methods to a second remote
	// (hedge.go); no groups, no hedging.
	Hedge HedgeConfig
	// Scoring orders the remotes of a tier (score.go); zero fields take
	// the defaults.
	Scoring ScoringConfig
	// Consensus puts the listed methods to a vote among several remotes
	// (consensus.go); no method is voted on unless configured.
	Consensus []ConsensusRule
	// CordonStrikes misbehaviours within CordonWithin take a remote out of
	// rotation for CordonPeriod (misbehave.go); 0 takes the defaults.
	CordonStrikes int
	CordonWithin  time.Duration
	CordonPeriod  time.Duration
	// MisbehaviourLog, when set, is a file each misbehaviour is appended to
	// as one JSON line.
	MisbehaviourLog string
	// PendingPollInterval is how often the pending-transaction filter that
	// serves newPendingTransactions without a WebSocket remote is polled
	// (relay_poll.go); 0 takes DefaultPendingPollInterval.
	PendingPollInterval time.Duration
	// Replies bounds the bytes of replies being read (replies.go). The app
	// gives every chain's pool the same one; nil: the pool has its own of
	// DefaultReplyBytesInFlight.
	Replies *ReplyBudget
}
