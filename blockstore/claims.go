package blockstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Claims shares a chain's blocks out among backfills running at once, on
// one host or many: a chunk is worked on only under its claim, a Postgres
// session advisory lock (pg_try_advisory_lock(chain key, chunk)). A claim
// lives as long as the session that took it, so a backfill that dies
// releases its claims with its connections.
type Claims struct {
	pool *pgxpool.Pool
	key  int32 // the chain's first lock key; the chunk is the second
}

// OpenClaims opens sessions sessions to the database at url for the claims
// on the chain's chunks.
func OpenClaims(ctx context.Context, url string, chainID uint64, sessions int) (*Claims, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("postgres.url: cannot be used (check its host and options)")
	}
	pc.MaxConns = int32(max(sessions, 1))
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", redact(err))
	}
	return &Claims{pool: pool, key: claimKey(chainID)}, nil
}

// Close ends every session, and with them any claim still held.
func (c *Claims) Close() { c.pool.Close() }

// claimKey is the chain's first advisory lock key. The two-key form has
// its own key space, apart from the single-key locks of the migrations
// and of Put.
func claimKey(chainID uint64) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("venn backfill " + strconv.FormatUint(chainID, 10)))
	return int32(h.Sum32())
}

// ClaimSession is one session of Claims; it holds at most the claims its
// worker took, one at a time.
type ClaimSession struct {
	conn *pgxpool.Conn
	key  int32
}

// Session takes a session; Close gives it back.
func (c *Claims) Session(ctx context.Context) (*ClaimSession, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", redact(err))
	}
	return &ClaimSession{conn: conn, key: c.key}, nil
}

// Close gives the session back to Claims.
func (s *ClaimSession) Close() { s.conn.Release() }

// Claim tries to claim chunk. ok is false when another session holds it.
// release ends the claim, even after ctx has ended; a session that cannot
// is closed with Claims, which ends the claim too.
func (s *ClaimSession) Claim(ctx context.Context, chunk uint64) (release func(), ok bool, err error) {
	if err := s.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", s.key, int32(uint32(chunk))).Scan(&ok); err != nil || !ok {
		return nil, false, redact(err)
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = s.conn.Exec(uctx, "SELECT pg_advisory_unlock($1, $2)", s.key, int32(uint32(chunk)))
	}, true, nil
}
