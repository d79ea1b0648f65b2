package side

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/evm"
	integ "github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
)

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

// CheckRoutes checks a chain's transaction_routes against the groups its
// remotes are in; each error names its field.
func CheckRoutes(routes []TxRoute, groups map[string]bool) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	seen := map[string]int{}
	for i, rt := range routes {
		path := fmt.Sprintf("transaction_routes[%d]", i)
		switch {
		case rt.Group == "":
			add(path+".group", "required")
		case !groups[rt.Group]:
			add(path+".group", "%q: no remote of the chain is in this group", rt.Group)
		}
		if len(rt.Methods) == 0 {
			add(path+".methods", "at least one method is required")
		}
		tenants := rt.Tenants
		if len(tenants) == 0 {
			tenants = []string{""}
		}
		for j, m := range rt.Methods {
			if m == "" || m != strings.TrimSpace(m) {
				add(fmt.Sprintf("%s.methods[%d]", path, j), "must be a method name, not %q", m)
				continue
			}
			for _, t := range tenants {
				k := m + "\x00" + t
				if first, dup := seen[k]; dup {
					add(fmt.Sprintf("%s.methods[%d]", path, j), "%s is routed by transaction_routes[%d] too", m, first)
				} else {
					seen[k] = i
				}
			}
		}
	}
	return errs
}

// Member is a remote beside the pool: a shadow, or a group's member.
type Member struct {
	Name string
	T    wire.Transport // closed by the Side
	// Shadow makes it a shadow, copied Sample of the reads (0:
	// DefaultShadowSample); else it serves Group's routes.
	Shadow bool
	Sample float64
	Group  string
}

// Config is what a Side is built from.
type Config struct {
	Chain        string
	CallDeadline time.Duration
	Members      []Member
	Routes       []TxRoute
	// Pool sends a call through the pool's own remotes: the calls no
	// route takes, and those of a route that falls back to the public
	// remotes.
	Pool    func(context.Context, *evm.Call) (json.RawMessage, error)
	Logger  *slog.Logger
	Metrics *Metrics
}

// Side is a pool's remotes beside it and its routes, replaced whole by a
// reload; its shadow calls are owned by it and stopped by Close.
type Side struct {
	cfg     Config
	shadows []*Member
	groups  map[string][]*Member
	// routes by method, each with its tenants (nil: everyone), tenant
	// routes first.
	routes map[string][]*route
	next   atomic.Uint64 // rotates a group's first member

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{}
}

type route struct {
	TxRoute
	tenants map[string]bool
}

// New builds the remotes beside the pool and the routes to them. It does
// no I/O.
func New(cfg Config) *Side {
	sd := &Side{cfg: cfg, groups: map[string][]*Member{}, routes: map[string][]*route{},
		slots: make(chan struct{}, maxShadowInFlight)}
	sd.ctx, sd.cancel = context.WithCancel(context.Background())
	for i := range cfg.Members {
		r := &cfg.Members[i]
		if r.Shadow {
			if r.Sample == 0 {
				r.Sample = DefaultShadowSample
			}
			sd.shadows = append(sd.shadows, r)
		} else {
			sd.groups[r.Group] = append(sd.groups[r.Group], r)
		}
	}
	for _, rt := range cfg.Routes {
		r := &route{TxRoute: rt}
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
		slices.SortStableFunc(list, func(a, b *route) int {
			return boolInt(a.tenants == nil) - boolInt(b.tenants == nil)
		})
		sd.routes[m] = list
	}
	return sd
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Close stops the side's shadow calls, waits for them and closes its
// transports.
func (sd *Side) Close() {
	if sd == nil {
		return
	}
	sd.cancel()
	sd.wg.Wait()
	for _, r := range sd.cfg.Members {
		r.T.Close()
	}
}

// Call serves a call of the chain: through its transaction route, if one
// takes it from ctx's caller; else through the pool, and then, for a
// read, copied to the shadows that sample it.
func (sd *Side) Call(ctx context.Context, c *evm.Call) (json.RawMessage, error) {
	if rt := sd.route(ctx, c.Method); rt != nil {
		return sd.routeTx(ctx, rt, c)
	}
	res, err := sd.cfg.Pool(ctx, c)
	if err == nil && len(sd.shadows) > 0 && c.Class == evm.ClassRead {
		sd.shadow(ctx, c, res)
	}
	return res, err
}

// route is the transaction route of a call of method from ctx's caller,
// or nil.
func (sd *Side) route(ctx context.Context, method string) *route {
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
func (sd *Side) routeTx(ctx context.Context, rt *route, c *evm.Call) (json.RawMessage, error) {
	group := sd.groups[rt.Group]
	chain, m := sd.cfg.Chain, sd.cfg.Metrics
	callCtx, cancel := context.WithTimeout(ctx, sd.cfg.CallDeadline)
	defer cancel()
	start := int(sd.next.Add(1))
	var lastErr error
	for i := range group {
		r := group[(start+i)%len(group)]
		res, _, err := r.T.Call(callCtx, c.Method, c.Params)
		if err == nil {
			m.routed(chain, rt.Group, "ok")
			return res, nil
		}
		lastErr = err
		v := verdict.Classify(c.Method, err)
		if v.Reason == verdict.ReasonAlreadyKnown && c.Method == "eth_sendRawTransaction" {
			if h, ok := integ.SentTxHash(c.Params); ok { // the relay has it: sent
				m.routed(chain, rt.Group, "ok")
				return json.RawMessage(`"` + h + `"`), nil
			}
		}
		if v.Class == verdict.ClassCaller {
			m.routed(chain, rt.Group, "caller_error")
			return nil, err
		}
		if callCtx.Err() != nil {
			break
		}
	}
	if rt.FallbackPublic && ctx.Err() == nil {
		m.routed(chain, rt.Group, "fallback_public")
		return sd.cfg.Pool(ctx, c)
	}
	m.routed(chain, rt.Group, "failed")
	reason := verdict.Reason("none")
	if lastErr != nil {
		reason = verdict.Classify(c.Method, lastErr).Reason
	}
	return nil, &GroupError{Method: c.Method, Chain: chain, Group: rt.Group, Tried: len(group), Last: reason}
}

// GroupError: every remote of a transaction route's group failed the
// call, and the route does not fall back to the public remotes (-32050,
// as when no remote of the pool could serve a call).
type GroupError struct {
	Method, Chain, Group string
	Tried                int
	Last                 verdict.Reason
}

func (e *GroupError) Error() string {
	return fmt.Sprintf("all %d remote(s) of group %s failed for %s on %s (last: %s); not sent to public remotes",
		e.Tried, e.Group, e.Method, e.Chain, e.Last)
}

func (e *GroupError) ErrorCode() int { return jrpc.CodeNoRemote }

// shadow copies a read the pool answered with served to the shadows that
// sample it, off the caller's goroutine.
func (sd *Side) shadow(ctx context.Context, c *evm.Call, served json.RawMessage) {
	chain, m := sd.cfg.Chain, sd.cfg.Metrics
	label := c.Row.Label
	for _, r := range sd.shadows {
		if r.Sample < 1 && rand.Float64() >= r.Sample {
			continue
		}
		select {
		case sd.slots <- struct{}{}:
		default:
			m.shadowed(chain, r.Name, label, "dropped")
			continue
		}
		// The copy keeps the caller's values (forwarded headers), not its
		// cancellation: the caller has its answer and may be gone.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sd.cfg.CallDeadline)
		stop := context.AfterFunc(sd.ctx, cancel)
		method, params := c.Method, c.Params
		sd.wg.Go(func() {
			defer func() { <-sd.slots }()
			defer cancel()
			defer stop()
			res, _, err := r.T.Call(sctx, method, params)
			outcome := "match"
			switch {
			case err != nil:
				outcome = "error"
			case !sameJSON(res, served):
				outcome = "mismatch"
				sd.cfg.Logger.LogAttrs(sctx, slog.LevelInfo, "shadow answer differs",
					slog.String("remote", r.Name), slog.String("method", label),
					slog.Int("served_bytes", len(served)), slog.Int("shadow_bytes", len(res)))
			}
			if sd.ctx.Err() == nil || outcome != "error" {
				m.shadowed(chain, r.Name, label, outcome)
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
