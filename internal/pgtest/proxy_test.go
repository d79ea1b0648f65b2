package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestProxy takes a database away and brings it back: a connection through
// the proxy works, is cut by Stop, new ones are refused while stopped, and
// they work again after Start.
func TestProxy(t *testing.T) {
	u := Empty(t)
	p := NewProxy(t, u)
	if p.URL() == u || Name(p.URL()) != Name(u) {
		t.Fatalf("URL through the proxy %q, database %q", p.URL(), u)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ping := func() error {
		conn, err := pgx.Connect(ctx, p.URL())
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		return conn.Ping(ctx)
	}

	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	defer conn.Close(context.Background())
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}

	p.Stop()
	if err := conn.Ping(ctx); err == nil {
		t.Error("a connection outlived Stop")
	}
	if err := ping(); err == nil {
		t.Error("a new connection succeeded while the proxy was stopped")
	}
	p.Stop() // again: nothing to do

	p.Start()
	if err := ping(); err != nil {
		t.Errorf("connect after Start: %v", err)
	}
}
