package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// flights lets identical concurrent reads share one upstream call.
//
// Unlike singleflight.DoChan it runs the call on the first caller's own
// goroutine: a gateway hop pays for every goroutine hand-off in latency, and
// most calls are never shared. The price is that the first caller waits for
// the shared call even if its own client leaves; the call is bounded by the
// chain's deadline, and the others may leave whenever they like.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	done chan struct{}
	val  json.RawMessage
	err  error
}

// do runs fn once for all concurrent callers with the same key. shared is
// true for the callers that got another's answer.
func (g *flights) do(ctx context.Context, key string, fn func() (json.RawMessage, error)) (val json.RawMessage, shared bool, err error) {
	g.mu.Lock()
	if f, ok := g.m[key]; ok {
		g.mu.Unlock()
		select {
		case <-f.done:
			return f.val, true, f.err
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	if g.m == nil {
		g.m = make(map[string]*flight)
	}
	f := &flight{done: make(chan struct{})}
	g.m[key] = f
	g.mu.Unlock()

	defer func() {
		if r := recover(); r != nil {
			f.err = fmt.Errorf("shared call panicked: %v", r)
			g.finish(key, f)
			panic(r)
		}
		g.finish(key, f)
	}()
	f.val, f.err = fn()
	return f.val, false, f.err
}

func (g *flights) finish(key string, f *flight) {
	g.mu.Lock()
	delete(g.m, key)
	g.mu.Unlock()
	close(f.done)
}
