package blockstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// A chunk claimed by one backfill is refused to another until it is
// released, or until the backfill holding it goes away; chains and chunks
// do not block each other.
func TestClaims(t *testing.T) {
	url := pgtest.New(t)
	ctx := context.Background()
	open := func(chainID uint64) *ClaimSession {
		t.Helper()
		c, err := OpenClaims(ctx, url, chainID, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		s, err := c.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	claim := func(s *ClaimSession, chunk uint64) (func(), bool) {
		t.Helper()
		release, ok, err := s.Claim(ctx, chunk)
		if err != nil {
			t.Fatal(err)
		}
		return release, ok
	}
	a, b, other := open(1), open(1), open(2)
	release, ok := claim(a, 7)
	if !ok {
		t.Fatal("a free chunk was refused")
	}
	if _, ok := claim(b, 7); ok {
		t.Fatal("a claimed chunk was given to a second backfill")
	}
	if r, ok := claim(b, 8); !ok {
		t.Fatal("another chunk of the chain was refused")
	} else {
		r()
	}
	if r, ok := claim(other, 7); !ok {
		t.Fatal("the same chunk of another chain was refused")
	} else {
		r()
	}
	release()
	r, ok := claim(b, 7)
	if !ok {
		t.Fatal("a released chunk stayed claimed")
	}
	_ = r // held until b's backfill goes away

	// A backfill that dies holding a claim releases it with its sessions.
	gone, err := OpenClaims(ctx, url, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gone.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(s, 1); !ok {
		t.Fatal("a free chunk was refused")
	}
	var pid int32
	if err := s.conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	s.Close()
	gone.Close()
	// Postgres releases the session's locks when its backend has seen the
	// connection close, which on a busy machine comes after Close returns.
	testkit.WaitFor(t, 20*time.Second, "the closed backfill's Postgres session ended", func() bool {
		var n int
		if err := b.conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if r, ok := claim(open(3), 1); !ok {
		t.Fatal("the claim of a closed backfill was kept")
	} else {
		r()
	}
}

// A URL that cannot be parsed is refused without echoing it (it may hold
// a password).
func TestClaimsBadURL(t *testing.T) {
	_, err := OpenClaims(context.Background(), "postgres://u:s3cret@[::1", 1, 1)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("err = %v, want a refusal without the password", err)
	}
}
