package admin

import (
	"context"
	"time"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/stalker"
)

// Pool is what admin reads and acts on of a chain's remotes; a
// *remotes.Pool is one.
type Pool interface {
	Status() []remotes.RemoteStatus
	SetCordons(now time.Time, cs []remotes.ManualCordon) (held []string)
	Ready() bool
}

var _ Pool = (*remotes.Pool)(nil)

// Heads is what admin reads of a chain's head tracking; a *remotes.Heads
// (remotes.Pool.Heads) is one.
type Heads interface {
	HeadStatus() remotes.HeadStatus
}

var _ Heads = (*remotes.Heads)(nil)

// Chain is one chain as the app hands it to admin.
type Chain struct {
	Name  string
	Path  string // where its JSON-RPC is served, "/NAME"
	Pool  Pool
	Heads Heads
	// State reads the rest of the chain's state on this replica.
	State func() ChainState
	// Leader reads who leads the chain in the cluster; nil: this replica
	// does, alone (no Redis).
	Leader func(ctx context.Context) (l stalker.Leader, ok bool, err error)
	// PurgeCache drops the chain's cache entries p selects, cluster-wide;
	// nil: the chain has no response cache.
	PurgeCache func(ctx context.Context, p cache.Purge) (int64, error)
}

// ChainState is a chain's state beside its pool, as the app reads it.
type ChainState struct {
	Leading   bool   `json:"leading"` // this replica leads the chain now
	Safe      uint64 `json:"safe"`
	Finalized uint64 `json:"finalized"`
	// Window is this replica's head window.
	Window Span `json:"window"`
	// Settled is the settled line (stalker.Settled): blocks at or below it
	// go to the history store. nil: not known yet.
	Settled     *uint64 `json:"settled,omitempty"`
	Subscribers int     `json:"subscribers"` // WebSocket connections with a subscription
	// History is the history store's state: off (no postgres.url), up,
	// down or migrating.
	History string `json:"history"`
	// Cache is the response cache's state, for the cache to fill (issue
	// 13); nil leaves it out.
	Cache any `json:"cache,omitempty"`
}

// Span is a range of blocks; Blocks 0 is empty.
type Span struct {
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Blocks int    `json:"blocks"`
}

// ChainView is one chain in the API's answers.
type ChainView struct {
	Name           string          `json:"name"`
	Path           string          `json:"path"`
	Ready          bool            `json:"ready"`
	Leader         *stalker.Leader `json:"leader,omitempty"` // nil: no leader now
	LeaderError    string          `json:"leader_error,omitempty"`
	Head           uint64          `json:"head"`
	HeadHash       string          `json:"head_hash,omitempty"`
	HeadAgeSeconds float64         `json:"head_age_seconds"`
	ChainState
	InRotation int      `json:"remotes_in_rotation"`
	Out        int      `json:"remotes_out"`
	Traffic    *Traffic `json:"traffic,omitempty"` // in GET /admin/status
	// Recent is the chain's figures over the charts' window (in GET
	// /admin/status), the status page's charts with them.
	Recent  *ChartView             `json:"recent,omitempty"`
	Remotes []remotes.RemoteStatus `json:"remotes,omitempty"`
}

// Overview is GET /admin/status: everything venn status prints.
type Overview struct {
	Replica    string        `json:"replica"`
	Version    string        `json:"version"`
	ConfigFile string        `json:"config_file"` // "" the built-in default
	Started    time.Time     `json:"started"`
	Draining   bool          `json:"draining"`
	Chains     []ChainView   `json:"chains"`
	Replicas   []ReplicaView `json:"replicas"`
}

// ReplicaView is one replica of the cluster, as its heartbeat says; its
// leads as the chains' leases say.
type ReplicaView struct {
	Replica  string    `json:"replica"`
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	LastSeen time.Time `json:"last_seen"`
	Leads    []string  `json:"leads,omitempty"` // chains whose lease it holds
	Self     bool      `json:"self,omitempty"`
}

// DrainReport is the answer of a drain.
type DrainReport struct {
	Draining bool `json:"draining"`
	// Released are the chains whose leadership this replica handed over;
	// Kept those it still leads, with Note saying why.
	Released []string `json:"released"`
	Kept     []string `json:"kept,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// Drainer drains this replica: /readyz 503, leaderships handed over.
type Drainer func(ctx context.Context) DrainReport

// Reloader re-reads, validates and applies the config file (the app's hot
// reload). report is its answer as JSON, applied whether anything
// changed; an invalid file is not applied and report lists its problems.
type Reloader func(ctx context.Context) (report any, applied bool)

// chainView reads one chain; with remotes, its remotes' states too.
func (a *Admin) chainView(ctx context.Context, c Chain, withRemotes bool) ChainView {
	hs := c.Heads.HeadStatus()
	v := ChainView{Name: c.Name, Path: c.Path, Ready: c.Pool.Ready(), Head: hs.Number, HeadHash: hs.Hash}
	if !hs.Time.IsZero() {
		v.HeadAgeSeconds = max(a.now().Sub(hs.Time), 0).Round(time.Millisecond).Seconds()
	}
	if c.State != nil {
		v.ChainState = c.State()
	}
	switch {
	case c.Leader == nil:
		if v.Leading {
			v.Leader = &stalker.Leader{Replica: a.opts.Replica, Epoch: 1}
		}
	default:
		l, ok, err := c.Leader(ctx)
		if err != nil {
			v.LeaderError = "cannot read the lease"
			a.log.Debug("admin: read leader", "chain", c.Name, "err", err)
		} else if ok {
			v.Leader = &l
		}
	}
	rs := c.Pool.Status()
	for _, r := range rs {
		if r.InRotation {
			v.InRotation++
		} else {
			v.Out++
		}
	}
	if withRemotes {
		v.Remotes = rs
	}
	return v
}
