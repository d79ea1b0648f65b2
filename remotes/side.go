package remotes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
)

// Remotes beside the pool: shadows and transaction groups. Neither is a
// member of the pool: no head is followed on them, no selection, score,
// budget, consensus or hedge counts them, and the pool's calls never
// reach them.
//
//   - A shadow (shadow: true) gets a sampled copy of the chain's reads
//     after they are answered; its answer is compared with the one served,
//     counted as a match or mismatch by method, and thrown away: the way
//     an operator dark-launches a provider.
//   - A group member (group: NAME) serves the chain's transaction_routes
//     that name its group: private relays for raw transactions and
//     bundles, bundlers for ERC-4337. A routed call fails over within its
//     group only, and reaches the public remotes only when its route says
//     fallback_public.

// Defaults of the remotes beside the pool.
const (
	// DefaultShadowSample is the share of reads copied to a shadow.
	DefaultShadowSample = 0.1
	// maxShadowInFlight bounds the shadow calls in flight per chain; past
	// it a copy is dropped (counted), never queued.
	maxShadowInFlight = 64
)

// TxRoute is one of a chain's transaction_routes: calls of Methods (from
// Tenants, when listed) go to the remotes of Group instead of the pool.
type TxRoute struct {
	// Methods routed: eth_sendRawTransaction, eth_sendBundle,
	// eth_sendPrivateTransaction, the ERC-4337 methods, ...
	Methods []string `yaml:"methods"`
	// Group names the remotes (their group) that serve the route.
	Group string `yaml:"group"`
	// Tenants, when listed, limits the route to their calls (the caller's
	// tenant, else its API key's name); others go to the pool as before.
	Tenants []string `yaml:"tenants"`
	// FallbackPublic sends a call every member of the group failed to the
	// pool (the public broadcast for a raw transaction); default false:
	// a private transaction never reaches a public remote.
	FallbackPublic bool `yaml:"fallback_public"`
}

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
	seen := map[string]int{}
	for i, rt := range c.TxRoutes {
		path := fmt.Sprintf("transaction_routes[%d]", i)
		switch {
		case rt.Group == "":
			p.add(path+".group", "required")
		case !groups[rt.Group]:
			p.add(path+".group", "%q: no remote of the chain is in this group", rt.Group)
		}
		if len(rt.Methods) == 0 {
			p.add(path+".methods", "at least one method is required")
		}
		tenants := rt.Tenants
		if len(tenants) == 0 {
			tenants = []string{""}
		}
		for j, m := range rt.Methods {
			if m == "" || m != stringsTrim(m) {
				p.add(fmt.Sprintf("%s.methods[%d]", path, j), "must be a method name, not %q", m)
				continue
			}
			for _, t := range tenants {
				k := m + "\x00" + t
				if first, dup := seen[k]; dup {
					p.add(fmt.Sprintf("%s.methods[%d]", path, j), "%s is routed by transaction_routes[%d] too", m, first)
				} else {
					seen[k] = i
				}
			}
		}
	}
}

func stringsTrim(s string) string { return string(bytes.TrimSpace([]byte(s))) }

// sideRemote is a remote beside the pool.
type sideRemote struct {
	name   string
	t      wire.Transport
	sample float64
}

// side is a pool's remotes beside it and its routes, replaced whole by a
// reload; its shadow calls are owned by it and stopped by close.
type side struct {
	shadows []*sideRemote
	groups  map[string][]*sideRemote
	// routes by method, each with its tenants (nil: everyone), tenant
	// routes first.
	routes map[string][]*txRoute
	next   atomic.Uint64 // rotates a group's first member

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{}
}

type txRoute struct {
	TxRoute
	tenants map[string]bool
}

// buildSide builds the remotes beside the pool from their configs (split
// out of the chain's remotes) and the chain's routes; nil when there are
// neither. It does no I/O.
func (p *Pool) buildSide(cfg PoolConfig, rs []Config) (*side, error) {
	if len(rs) == 0 && len(cfg.TxRoutes) == 0 {
		return nil, nil
	}
	sd := &side{groups: map[string][]*sideRemote{}, routes: map[string][]*txRoute{},
		slots: make(chan struct{}, maxShadowInFlight)}
	sd.ctx, sd.cancel = context.WithCancel(context.Background())
	for _, rc := range rs {
		rc = rc.WithDefaults(cfg.CallDeadline).forPool(cfg)
		t, err := wire.New(wire.Options{Name: rc.Name, URL: rc.URL, Headers: headerOf(rc.Headers),
			MaxIdleConns: max(rc.MaxInFlight, 16), MaxResponseBytes: rc.MaxResponseBytes, Budget: cfg.Replies,
			Logger: p.log, Tracer: cfg.Tracer, Forward: forwardingOf(rc)})
		if err != nil {
			sd.close()
			return nil, fmt.Errorf("chain %s: %w", cfg.Chain, err)
		}
		r := &sideRemote{name: rc.Name, t: t, sample: rc.ShadowSample}
		if rc.Shadow {
			if r.sample == 0 {
				r.sample = DefaultShadowSample
			}
			sd.shadows = append(sd.shadows, r)
		} else {
			sd.groups[rc.Group] = append(sd.groups[rc.Group], r)
		}
	}
	for _, rt := range cfg.TxRoutes {
		r := &txRoute{TxRoute: rt}
		if len(rt.Tenants) > 0 {
			r.tenants = make(map[string]bool, len(rt.Tenants))
			for _, t := range rt.Tenants {
				r.tenants[t] = true
			}
		}
		for _, m := range rt.Methods {
			sd.routes[m] = append(sd.routes[m], r)
		}
	}
	for m, list := range sd.routes {
		slices.SortStableFunc(list, func(a, b *txRoute) int {
			return boolInt(a.tenants == nil) - boolInt(b.tenants == nil)
		})
		sd.routes[m] = list
	}
	return sd, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// close stops the side's shadow calls, waits for them and closes its
// transports.
func (sd *side) close() {
	if sd == nil {
		return
	}
	sd.cancel()
	sd.wg.Wait()
	for _, r := range sd.shadows {
		r.t.Close()
	}
	for _, g := range sd.groups {
		for _, r := range g {
			r.t.Close()
		}
	}
}

// setSide puts sd in force and closes the one it replaces, once the
// latter's shadow calls are done.
func (p *Pool) setSide(sd *side) {
	if old := p.side.Swap(sd); old != nil {
		p.wg.Go(old.close)
	}
}

// route is the transaction route of a call of method from ctx's caller,
// or nil.
func (sd *side) route(ctx context.Context, method string) *txRoute {
	list := sd.routes[method]
	if len(list) == 0 {
		return nil
	}
	tenant := ""
	if pr, ok := jrpc.PeerFromContext(ctx); ok {
		tenant = pr.Tenant
		if tenant == "" {
			tenant = pr.Key
		}
	}
	for _, r := range list {
		if r.tenants == nil || r.tenants[tenant] {
			return r
		}
	}
	return nil
}

// routeTx sends a routed call to its group's remotes, one after another
// from a rotating first, until one answers or says the call is the
// caller's fault; then, if every one failed, to the pool when the route
// falls back to it.
func (p *Pool) routeTx(ctx context.Context, sd *side, rt *txRoute, c *evm.Call) (json.RawMessage, error) {
	group := sd.groups[rt.Group]
	cfg := p.conf()
	callCtx, cancel := context.WithTimeout(ctx, cfg.CallDeadline)
	defer cancel()
	start := int(sd.next.Add(1))
	var lastErr error
	for i := range group {
		r := group[(start+i)%len(group)]
		res, _, err := r.t.Call(callCtx, c.Method, c.Params)
		if err == nil {
			p.m.sd.routed(cfg.Chain, rt.Group, "ok")
			return res, nil
		}
		lastErr = err
		v := verdict.Classify(c.Method, err)
		if v.Reason == verdict.ReasonAlreadyKnown && c.Method == "eth_sendRawTransaction" {
			if h := txHash(c.Params); h != nil { // the relay has it: sent
				p.m.sd.routed(cfg.Chain, rt.Group, "ok")
				return h, nil
			}
		}
		if v.Class == verdict.ClassCaller {
			p.m.sd.routed(cfg.Chain, rt.Group, "caller_error")
			return nil, err
		}
		if callCtx.Err() != nil {
			break
		}
	}
	if rt.FallbackPublic && ctx.Err() == nil {
		p.m.sd.routed(cfg.Chain, rt.Group, "fallback_public")
		return p.callPool(ctx, c)
	}
	p.m.sd.routed(cfg.Chain, rt.Group, "failed")
	reason := verdict.Reason("none")
	if lastErr != nil {
		reason = verdict.Classify(c.Method, lastErr).Reason
	}
	return nil, &noRemoteError{method: c.Method, chain: cfg.Chain, group: rt.Group, tried: len(group), last: reason}
}

// shadow copies a read the pool answered with served to the shadows that
// sample it, off the caller's goroutine.
func (p *Pool) shadow(ctx context.Context, sd *side, c *evm.Call, served json.RawMessage) {
	chain := p.conf().Chain
	label := c.Row.Label
	for _, r := range sd.shadows {
		if r.sample < 1 && rand.Float64() >= r.sample {
			continue
		}
		select {
		case sd.slots <- struct{}{}:
		default:
			p.m.sd.shadowed(chain, r.name, label, "dropped")
			continue
		}
		// The copy keeps the caller's values (forwarded headers), not its
		// cancellation: the caller has its answer and may be gone.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.conf().CallDeadline)
		stop := context.AfterFunc(sd.ctx, cancel)
		method, params := c.Method, c.Params
		sd.wg.Go(func() {
			defer func() { <-sd.slots }()
			defer cancel()
			defer stop()
			res, _, err := r.t.Call(sctx, method, params)
			outcome := "match"
			switch {
			case err != nil:
				outcome = "error"
			case !sameJSON(res, served):
				outcome = "mismatch"
				p.log.LogAttrs(sctx, slog.LevelInfo, "shadow answer differs",
					slog.String("remote", r.name), slog.String("method", label),
					slog.Int("served_bytes", len(served)), slog.Int("shadow_bytes", len(res)))
			}
			if sd.ctx.Err() == nil || outcome != "error" {
				p.m.sd.shadowed(chain, r.name, label, outcome)
			}
		})
	}
}

// sameJSON reports whether a and b are the same JSON value: byte for
// byte, or once key order and spacing are set aside.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// sideMetrics count the shadows' answers and the routed calls.
type sideMetrics struct {
	shadow *prometheus.CounterVec // chain, remote, method, outcome
	routes *prometheus.CounterVec // chain, group, outcome
}

func newSideMetrics(reg prometheus.Registerer) *sideMetrics {
	m := &sideMetrics{
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "shadow_calls_total",
			Help: "Reads copied to a shadow remote, by outcome: match, mismatch (its answer differs from the one served), error, dropped (too many in flight)."},
			[]string{"chain", "remote", "method", "outcome"}),
		routes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "tx_route_calls_total",
			Help: "Calls a transaction route sent to its group, by outcome: ok, caller_error, failed (every member), fallback_public."},
			[]string{"chain", "group", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.shadow, m.routes)
	}
	return m
}

func (m *sideMetrics) shadowed(chain, remote, method, outcome string) {
	m.shadow.WithLabelValues(chain, remote, method, outcome).Inc()
}

func (m *sideMetrics) routed(chain, group, outcome string) {
	m.routes.WithLabelValues(chain, group, outcome).Inc()
}
