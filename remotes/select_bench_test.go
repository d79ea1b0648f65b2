package remotes

import (
	"testing"
	"time"

	"github.com/venn-gateway/venn/remotes/relay"
)

// BenchmarkPick is selection alone: one pick among three remotes in
// rotation, for a call and for a relay (relayHost.Pick, through which remotes/relay picks; its
// own share is remotes/relay's BenchmarkPick).
func BenchmarkPick(b *testing.B) {
	p := cannedPool(b, PoolConfig{}, 3, func(_ int, c *Config) { c.WSURL = "ws://127.0.0.1:9" })
	b.Run("call", func(b *testing.B) {
		for b.Loop() {
			if r, _ := p.pick("eth_getBalance", route{}, 0); r == nil {
				b.Fatal("no remote")
			}
		}
	})
	b.Run("relay", func(b *testing.B) {
		host := relayHost{p}
		for b.Loop() {
			if host.Pick(time.Now(), relay.Upstream.CanSubscribe) == nil {
				b.Fatal("no remote")
			}
		}
	})
}
