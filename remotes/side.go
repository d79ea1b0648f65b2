package remotes

import (
	"fmt"

	"github.com/venn-gateway/venn/remotes/side"
	"github.com/venn-gateway/venn/remotes/wire"
)

// Remotes beside the pool, shadows and transaction groups, are
// remotes/side's: this file splits them out of a chain's remotes, checks
// their settings and builds the side a call goes through.

// DefaultShadowSample is the share of reads copied to a shadow
// (side.DefaultShadowSample).
const DefaultShadowSample = side.DefaultShadowSample

// TxRoute is one of a chain's transaction_routes (side.TxRoute).
type TxRoute = side.TxRoute

// Side reports whether rc is a remote beside the pool (a shadow or a
// group's member).
func (c Config) Side() bool { return c.Shadow || c.Group != "" }

// splitSide takes the remotes beside the pool out of rs.
func splitSide(rs []Config) (pool, side []Config) {
	for _, rc := range rs {
		if rc.Side() {
			side = append(side, rc)
		} else {
			pool = append(pool, rc)
		}
	}
	return pool, side
}

// validateSide checks a remote's shadow and group settings.
func (c Config) validateSide(p *problems) {
	if c.Shadow && c.Group != "" {
		p.add("shadow", "a remote is a shadow or in a group, not both")
	}
	if c.Group != "" && !remoteNameRE.MatchString(c.Group) {
		p.add("group", "must match [A-Za-z0-9_.-]+, not %q", c.Group)
	}
	if s := c.ShadowSample; s < 0 || s > 1 || s != s {
		p.add("shadow_sample", "must be in [0, 1]")
	}
	if c.ShadowSample != 0 && !c.Shadow {
		p.add("shadow_sample", "needs shadow: true")
	}
	if c.Side() && c.URL != "" {
		if ok, _ := checkURL(c.URL, "http", "https"); !ok {
			p.add("url", "must be http(s):// for a shadow or a group's remote")
		}
	}
}

// validateRoutes checks the chain's transaction_routes against its
// remotes' groups.
func (c PoolConfig) validateRoutes(p *problems, rs []Config) {
	groups := map[string]bool{}
	public := 0
	for _, r := range rs {
		if r.Group != "" {
			groups[r.Group] = true
		}
		if !r.Side() {
			public++
		}
	}
	if len(rs) > 0 && public == 0 {
		p.add("remotes", "at least one remote must be neither a shadow nor in a group")
	}
	p.List = append(p.List, side.CheckRoutes(c.TxRoutes, groups)...)
}

// buildSide builds the remotes beside the pool from their configs (split
// out of the chain's remotes) and the chain's routes; nil when there are
// neither. It does no I/O.
func (p *Pool) buildSide(cfg PoolConfig, rs []Config) (*side.Side, error) {
	if len(rs) == 0 && len(cfg.TxRoutes) == 0 {
		return nil, nil
	}
	members := make([]side.Member, 0, len(rs))
	for _, rc := range rs {
		rc = rc.WithDefaults(cfg.CallDeadline).forPool(cfg)
		t, err := wire.New(wire.Options{Name: rc.Name, URL: rc.URL, Headers: headerOf(rc.Headers),
			MaxIdleConns: max(rc.MaxInFlight, 16), MaxResponseBytes: rc.MaxResponseBytes, Budget: cfg.Replies,
			Logger: p.log, Tracer: cfg.Tracer, Forward: forwardingOf(rc)})
		if err != nil {
			for _, m := range members {
				m.T.Close()
			}
			return nil, fmt.Errorf("chain %s: %w", cfg.Chain, err)
		}
		members = append(members, side.Member{Name: rc.Name, T: t, Shadow: rc.Shadow, Sample: rc.ShadowSample, Group: rc.Group})
	}
	return side.New(side.Config{Chain: cfg.Chain, CallDeadline: cfg.CallDeadline, Members: members, Routes: cfg.TxRoutes,
		Logger: p.log, Metrics: p.m.sd}), nil
}

// setSide puts sd in force and closes the one it replaces, once the
// latter's shadow calls are done.
func (p *Pool) setSide(sd *side.Side) {
	if old := p.side.Swap(sd); old != nil {
		p.wg.Go(old.Close)
	}
}
