package subcenter

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkFanout is one block's newHeads notification to every subscriber,
// each on its own WebSocket through a real jrpc server, until all of them
// have read it: the replica's cost per notification, clients included.
func BenchmarkFanout(b *testing.B) {
	const clients = 500
	t := &testing.T{}
	f := &feed{t: t, w: newFeed(t, 128).w}
	f.extend("a", 1, 1, "a")
	c := New("test", f.w, nil, Options{}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	url := serveWSB(b, c)
	got := make(chan struct{}, clients)
	for range clients {
		ws, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ws.CloseNow()
		if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
		go func() {
			for {
				if _, _, err := ws.Read(ctx); err != nil {
					return
				}
				got <- struct{}{}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	b.ResetTimer()
	for i := range b.N {
		f.extend("a", uint64(i)+2, uint64(i)+2, "a")
		for range clients {
			<-got
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*clients), "ns/notification")
}
