package nats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/natstest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// With no server answering, Start returns at once (the connection keeps
// trying in the background), a request service can subscribe, and Stop
// ends it all promptly: NATS being away holds nothing up.
func TestStartWithoutAServer(t *testing.T) {
	cfg := Config{URL: "nats://" + testkit.ClosedAddr(t)}.WithDefaults()
	cfg.ReconnectWait = 20 * time.Millisecond
	c := New(cfg, "venn test", nil, nil)
	start := time.Now()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Start took %v with no server", d)
	}
	if st := c.Status(); st.State == "connected" || st.Server != "" {
		t.Fatalf("status with no server: %+v", st)
	}
	rpc := NewRPC(c, nil, nil, nil)
	if err := rpc.Serve(testChain); err != nil {
		t.Fatalf("Serve with no server: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rpc.Stop(ctx); err != nil {
		t.Fatalf("rpc stop: %v", err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("conn stop: %v", err)
	}
	if st := c.Status(); st.State != "closed" {
		t.Fatalf("status after Stop: %+v", st)
	}
}

// Credentials reach the server through nats.go's options, and neither the
// status nor the last error ever shows them: a token travels as a URL's
// user name, which url.Redacted would keep.
func TestCredentialsNeverShown(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{NoJetStream: true, Token: "t0ken-secret"})
	tests := []struct {
		name string
		give Config
	}{
		{name: "token option", give: Config{URL: ns.URL(), Token: "t0ken-secret"}},
		{name: "token in the URL", give: Config{URL: strings.Replace(ns.URL(), "nats://", "nats://t0ken-secret@", 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.give.WithDefaults(), "venn test", nil, nil)
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			defer c.Stop(ctx)
			if !c.Connected() {
				t.Fatalf("not connected: %+v", c.Status())
			}
			if st := c.Status(); st.Server != ns.URL() || strings.Contains(st.Server+st.LastError, "t0ken") {
				t.Fatalf("status %+v", st)
			}
		})
	}
	// A wrong token: refused, and the error does not quote it.
	c := New(Config{URL: ns.URL(), Token: "wrong-secret"}.WithDefaults(), "venn test", nil, nil)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer c.Stop(ctx)
	testkit.WaitFor(t, 10*time.Second, "the refusal recorded", func() bool { return c.LastError() != "" })
	if st := c.Status(); st.State == "connected" || strings.Contains(st.LastError, "wrong-secret") {
		t.Fatalf("status with a wrong token: %+v", st)
	}
}
