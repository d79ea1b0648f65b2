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

// TestProxyPause stalls the database: a query on an open connection and a
// new connection both wait (they neither fail nor answer) until Resume,
// after which both complete; Stop cuts a paused connection.
func TestProxyPause(t *testing.T) {
	p := NewProxy(t, Empty(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	defer conn.Close(context.Background())

	p.Pause()
	p.Pause() // again: nothing to do
	query := make(chan error, 1)
	go func() {
		var one int
		query <- conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	}()
	dial := make(chan error, 1)
	go func() {
		c, err := pgx.Connect(ctx, p.URL())
		if err == nil {
			err = c.Ping(ctx)
			c.Close(context.Background())
		}
		dial <- err
	}()
	// Held: neither answers within a while the server answers in well
	// under a millisecond. This waits for a non-event, so it can only
	// miss a fault, never invent one.
	select {
	case err := <-query:
		t.Fatalf("a query answered while paused: %v", err)
	case err := <-dial:
		t.Fatalf("a connection was set up while paused: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	p.Resume()
	for name, ch := range map[string]chan error{"query": query, "new connection": dial} {
		if err := <-ch; err != nil {
			t.Errorf("%s after Resume: %v", name, err)
		}
	}

	p.Pause()
	go func() {
		var one int
		query <- conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	}()
	p.Stop()
	if err := <-query; err == nil {
		t.Error("a paused query survived Stop")
	}
	p.Resume()
}
