package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"go.uber.org/fx"

	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/jrpc"
)

// The pieces a reload swaps, and what triggers one.

// gate is the JSON-RPC server's jrpc.Gate and CORS wrapper: the edge in
// force, which a reload replaces whole. A request is admitted by the edge
// loaded when it arrived; a WebSocket connection keeps the one it was
// upgraded by.
type gate struct {
	cur  atomic.Pointer[gated]
	next http.Handler // the JSON-RPC server's handler, set by wrap
	mu   sync.Mutex   // orders set against wrap
}

// gated is one edge and the CORS wrapper built on it once, not per
// request.
type gated struct {
	edge    *edge.Edge
	handler http.Handler // nil until wrap
}

var _ jrpc.Gate = (*gate)(nil)

func newGate(e *edge.Edge) *gate {
	g := &gate{}
	g.cur.Store(&gated{edge: e})
	return g
}

func (g *gate) load() *edge.Edge { return g.cur.Load().edge }

// set puts e in force for the next request.
func (g *gate) set(e *edge.Edge) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ge := &gated{edge: e}
	if g.next != nil {
		ge.handler = e.Wrap(g.next)
	}
	g.cur.Store(ge)
}

// wrap puts the edge in force's CORS in front of next.
func (g *gate) wrap(next http.Handler) http.Handler {
	g.mu.Lock()
	g.next = next
	g.mu.Unlock()
	g.set(g.load())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.cur.Load().handler.ServeHTTP(w, r)
	})
}

// Admit implements jrpc.Gate.
func (g *gate) Admit(r *http.Request, a jrpc.Admission) (jrpc.Caller, *jrpc.Refusal) {
	return g.load().Admit(r, a)
}

// KeysInPath implements jrpc.Gate. The server asks once, at start.
func (g *gate) KeysInPath() bool { return g.load().KeysInPath() }

// newLogLevel is the level every log line is filtered by, which a reload
// sets (log.level).
func newLogLevel(cfg *Config) (*slog.LevelVar, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(cfg.Log.Level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	lv := new(slog.LevelVar)
	lv.Set(l)
	return lv, nil
}

// reloadSignalsName names the channel of signals that trigger a reload
// (ReloadSignals); without one, SIGHUP does.
const reloadSignalsName = "app_reload_signals"

// ReloadSignals reloads the config on each value from ch instead of on
// SIGHUP: for tests, which must not signal their own process.
func ReloadSignals(ch <-chan os.Signal) fx.Option {
	return fx.Provide(fx.Annotate(
		func() <-chan os.Signal { return ch },
		fx.ResultTags(`name:"`+reloadSignalsName+`"`),
	))
}

type reloadSignalParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Reloader  *Reloader
	Signals   <-chan os.Signal `name:"app_reload_signals" optional:"true"`
}

// watchReloadSignals reloads on every SIGHUP (or injected signal) while
// the app runs. Reloads run one at a time; signals that arrive during one
// are folded into the next.
func watchReloadSignals(p reloadSignalParams) {
	sigs := p.Signals
	var hup chan os.Signal
	if sigs == nil {
		hup = make(chan os.Signal, 1)
		sigs = hup
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(context.Context) error {
			if hup != nil {
				signal.Notify(hup, syscall.SIGHUP)
			}
			go func() {
				defer close(done)
				for {
					select {
					case <-ctx.Done():
						return
					case <-sigs:
						p.Reloader.reload(ctx)
					}
				}
			}()
			return nil
		},
		OnStop: func(context.Context) error {
			if hup != nil {
				signal.Stop(hup)
			}
			cancel()
			<-done
			return nil
		},
	})
}
