package remotes

import (
	"fmt"

	"github.com/venn-gateway/venn/remotes/fielderr"
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

// validateRoutes checks the chain's transaction_routes against its
// remotes' groups.
func (c PoolConfig) validateRoutes(p *fielderr.List, rs []Config) {
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
		p.Add("remotes", "at least one remote must be neither a shadow nor in a group")
	}
	*p = append(*p, side.CheckRoutes(c.TxRoutes, groups)...)
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
		rc = forPool(rc.WithDefaults(cfg.CallDeadline), cfg)
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
