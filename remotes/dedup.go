package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/venn-gateway/venn/jrpc"
)

// flights lets identical concurrent reads share one upstream call.
//
// Unlike singleflight.DoChan it runs the call on the first caller's own
// goroutine: a gateway hop pays for every goroutine hand-off in latency, and
// most calls are never shared. The shared call runs on a context of its own,
// so one caller leaving does not fail the others; it is cancelled when every
// caller has left, so a client that hangs up stops costing upstream calls
// (a split eth_getLogs, say) and frees its slot at once.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	done    chan struct{}
	val     json.RawMessage
	err     error
	remote  string // the remotes the first caller's note named: the sharers' too
	callers int    // still waiting, guarded by flights.mu
	cancel  context.CancelFunc
}

// do runs fn once for all concurrent callers with the same key. fn gets a
// context that ends when every caller has left. shared is true for the
// callers that got another's answer; their notes name the remotes that
// answered, as the first caller's does.
func (g *flights) do(ctx context.Context, key string, fn func(context.Context) (json.RawMessage, error)) (val json.RawMessage, shared bool, err error) {
	g.mu.Lock()
	if f, ok := g.m[key]; ok {
		f.callers++
		g.mu.Unlock()
		select {
		case <-f.done:
			if n := jrpc.NoteOf(ctx); n != nil {
				n.Merge(&jrpc.Note{Remote: f.remote})
			}
			return f.val, true, f.err
		case <-ctx.Done():
			g.leave(key, f)
			return nil, false, ctx.Err()
		}
	}
	if g.m == nil {
		g.m = make(map[string]*flight)
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &flight{done: make(chan struct{}), callers: 1, cancel: cancel}
	g.m[key] = f
	g.mu.Unlock()

	stop := context.AfterFunc(ctx, func() { g.leave(key, f) })
	defer func() {
		stop()
		cancel()
		if r := recover(); r != nil {
			f.err = fmt.Errorf("shared call panicked: %v", r)
			g.finish(key, f)
			panic(r)
		}
		g.finish(key, f)
	}()
	f.val, f.err = fn(fctx)
	if n := jrpc.NoteOf(ctx); n != nil {
		f.remote = n.Remote // before finish: the sharers read it once done
	}
	if f.err != nil && ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	return f.val, false, f.err
}

// leave drops a caller that gave up; the last one out cancels the call and
// unlists it, so a later identical call starts afresh.
func (g *flights) leave(key string, f *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.callers--
	if f.callers > 0 {
		return
	}
	if g.m[key] == f {
		delete(g.m, key)
	}
	f.cancel()
}

func (g *flights) finish(key string, f *flight) {
	g.mu.Lock()
	if g.m[key] == f {
		delete(g.m, key)
	}
	g.mu.Unlock()
	close(f.done)
}
