package remotes

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkPick is selection alone: one pick among three remotes in
// rotation, for a call and for a relay (pickRelay, which picks through it).
func BenchmarkPick(b *testing.B) {
	p := cannedPool(b, PoolConfig{}, 3, func(_ int, c *Config) { c.WSURL = "ws://127.0.0.1:9" })
	b.Run("call", func(b *testing.B) {
		for b.Loop() {
			if r, _ := p.pick("eth_getBalance", route{}, 0); r == nil {
				b.Fatal("no remote")
			}
		}
	})
	key := subscribeKey(json.RawMessage(`["newHeads"]`))
	b.Run("relay", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := p.pickRelay(key, time.Now()); !ok {
				b.Fatal("no remote")
			}
		}
	})
}
