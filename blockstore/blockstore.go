// Package blockstore keeps settled history (blocks, transactions, receipts
// and logs of many chains) in Postgres and answers JSON-RPC reads from it
// byte for byte as the node did. It knows which ranges it holds completely
// (coverage) and answers ok=false for anything else, so callers fall
// through to the remotes.
//
// The store never decides what is settled: callers hand it only blocks at
// or below their settled line, and Put refuses a block that disagrees with
// a stored neighbour. The schema's SQL is package migrations'; History
// (history.go) applies it when a process starts, keeps each chain's store
// shut until it is in place, and reports the store's readiness. Claims
// (claims.go) share a chain's blocks out among backfills running at once.
package blockstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Range is an inclusive range of block numbers.
type Range struct{ From, To uint64 }

// Options configure a Postgres store.
type Options struct {
	Logger     *slog.Logger          // nil: slog.Default()
	Registerer prometheus.Registerer // nil: no metrics registered
	MaxConns   int32                 // pool size; 0: pgxpool's default (at least 4)
	// ReadTimeout bounds one read, connection included; 0:
	// DefaultReadTimeout. A read that runs out of it fails, and callers
	// fall through to the remotes.
	ReadTimeout time.Duration
	// WriteTimeout bounds one Put; 0: DefaultWriteTimeout.
	WriteTimeout time.Duration
}

// Defaults of Options.
const (
	// DefaultReadTimeout is well inside a client call's deadline, so that
	// a read Postgres does not answer leaves the remotes most of it, and
	// far above what a read takes (an eth_getLogs of 12 MB: 0.2 s).
	DefaultReadTimeout = 2 * time.Second
	// DefaultWriteTimeout leaves a batch of a few hundred busy blocks
	// (one COPY transaction) room on a loaded server; a larger
	// history.batch may need more.
	DefaultWriteTimeout = 30 * time.Second
)

// ErrConflict is returned by Put when a block disagrees with a stored
// block (another hash at its number) or with a stored or batched
// neighbour (a parent link that does not hold); nothing of the batch is
// stored.
var ErrConflict = errors.New("blockstore: block conflicts with a stored neighbour")

// ErrInvalidBlock is returned by Put for a block the store cannot hold
// exactly (not a block with receipts as evm.ParseBlock checks them,
// a log with more than four topics, control characters in its JSON);
// nothing of the batch is stored. Retrying does not help.
var ErrInvalidBlock = errors.New("blockstore: block cannot be stored")

// ErrTooLarge is returned by Logs when the answer would pass maxAnswerBytes;
// the caller asks the remotes, which split the range.
var ErrTooLarge = errors.New("blockstore: answer too large")

// ErrNotCovered is returned by Logs for a range not stored completely when
// it is read (retention may have dropped it since the caller looked).
var ErrNotCovered = errors.New("blockstore: range not stored")

// errDown is returned without asking Postgres while it is known to be
// unreachable; a background probe notices its return.
var errDown = errors.New("postgres is unreachable")

// Timing of the outage handling.
const (
	// probeInterval is how often an unreachable Postgres is pinged.
	probeInterval = time.Second
	// connectTimeout bounds one connection attempt, so that an unreachable
	// Postgres costs a caller at most this before it falls through.
	connectTimeout = 3 * time.Second
	// openPingTimeout bounds the ping Open makes to learn the state.
	openPingTimeout = 2 * time.Second
	// healthInterval is how often a reachable Postgres is pinged, so that
	// a stall is noticed (and Up says so) without a call running into it.
	healthInterval = 5 * time.Second
)

// statementTimeout is the statement_timeout Postgres enforces on the
// store's statements under a call bounded by d: a quarter earlier, so that
// a statement a working server is slow with (a lock wait, a huge scan) is
// cancelled by Postgres and fails alone, on a connection that stays open,
// before d runs out; only a server that does not answer at all reaches d,
// which counts as an outage.
func statementTimeout(d time.Duration) time.Duration { return d - d/4 }

// maxAnswerBytes bounds one answer built from stored rows.
const maxAnswerBytes = 128 << 20

// Postgres is the history store on a Postgres database. Its pool connects
// lazily and reconnects by itself. Every call is bounded (reads by
// ReadTimeout, writes by WriteTimeout); a Postgres that refuses or does
// not answer in time is down: while it is, every call fails at once with
// an error (callers fall through to the remotes), a probe pings it every
// second, and calls resume when it answers. While it is up a ping every
// few seconds checks that it still answers.
type Postgres struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	m    *metrics

	readTimeout, writeTimeout time.Duration

	up        atomic.Bool
	mu        sync.Mutex // orders the outage logs with the state changes
	downSince time.Time

	stop context.CancelFunc // ends the probe
	done chan struct{}      // closed when the probe has ended
	wake chan struct{}      // a call saw Postgres fail: probe now
}

// Open returns a store on the database at url. The pool is lazy: Open
// fails only on a malformed url, not when Postgres is down.
func Open(ctx context.Context, url string, opts Options) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("blockstore: postgres url: %w", redact(err))
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > connectTimeout {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	readTimeout, writeTimeout := opts.ReadTimeout, opts.WriteTimeout
	if readTimeout <= 0 {
		readTimeout = DefaultReadTimeout
	}
	if writeTimeout <= 0 {
		writeTimeout = DefaultWriteTimeout
	}
	// Reads run as single statements under the session's timeout; Put sets
	// its own for its transaction. One the URL sets is kept. It is set
	// after connecting rather than as a startup parameter, which PgBouncer
	// refuses.
	if _, set := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !set {
		ms := milliseconds(statementTimeout(readTimeout))
		cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			// The pool connects on in the background when the caller
			// gives up: bounded as the connection itself is.
			ctx, cancel := context.WithTimeout(ctx, connectTimeout)
			defer cancel()
			_, err := conn.Exec(ctx, `SELECT set_config('statement_timeout', $1, false)`, ms)
			return err
		}
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("blockstore: postgres pool: %w", redact(err))
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	p := &Postgres{
		pool:         pool,
		log:          log.With("component", "blockstore"),
		m:            newMetrics(opts.Registerer),
		readTimeout:  readTimeout,
		writeTimeout: writeTimeout,
		done:         make(chan struct{}),
		wake:         make(chan struct{}, 1),
	}
	p.up.Store(true)
	p.m.up.Set(1)
	pctx, cancel := context.WithTimeout(ctx, openPingTimeout)
	err = pool.Ping(pctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		p.down(err)
	}
	probeCtx, stop := context.WithCancel(context.Background())
	p.stop = stop
	go p.probe(probeCtx)
	return p, nil
}

// Close stops the probe and closes the pool.
func (p *Postgres) Close() {
	p.stop()
	<-p.done
	p.pool.Close()
}

// Up reports whether Postgres is reachable: false from a failed call (or
// check) until a probe gets an answer again.
func (p *Postgres) Up() bool { return p.up.Load() }

// Ping checks that Postgres answers, as a read: within the read timeout,
// at once errDown while it is known down.
func (p *Postgres) Ping(ctx context.Context) error {
	return p.do(ctx, opPing, true, p.pool.Ping)
}

// milliseconds formats d as a Postgres setting in milliseconds.
func milliseconds(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}

// Chain returns the store of one chain, kept by the default Policy; name
// labels its errors.
func (p *Postgres) Chain(chainID uint64, name string) *Chain {
	return p.ChainWith(chainID, name, Policy{})
}

// ChainWith returns the store of one chain, kept by pol.
func (p *Postgres) ChainWith(chainID uint64, name string, pol Policy) *Chain {
	h := fnv.New64a()
	fmt.Fprintf(h, "venn blockstore put %d", chainID)
	span := pol.PartitionBlocks
	if span == 0 {
		span = DefaultPartitionBlocks
	}
	return &Chain{p: p, id: int64(chainID), name: name, lockKey: int64(h.Sum64()),
		span: min(span, maxBlockNumber), keep: pol.KeepBlocks, parts: &partitions{}}
}

// Chain is the history of one chain.
type Chain struct {
	p       *Postgres
	id      int64
	name    string
	lockKey int64 // the advisory lock that orders Puts' link checks
	span    uint64
	keep    uint64 // 0: all
	parts   *partitions
}

// do runs one of the chain's operations against Postgres.
func (c *Chain) do(ctx context.Context, op string, idempotent bool, fn func(context.Context) error) error {
	err := c.p.do(ctx, op, idempotent, fn)
	if err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrNotCovered) {
		return fmt.Errorf("blockstore %s %s: %w", c.name, op, err)
	}
	return err
}

// do runs one operation against Postgres: at once errDown while it is
// unreachable, and otherwise fn, whose error it classifies and counts. fn
// gets a context bounded by the read timeout for a read (idempotent), the
// write timeout for a write; running out of it (acquiring a connection or
// waiting for an answer) is an outage like a refused connection. A read
// that fails as if Postgres were unreachable is tried once more within the
// same bound: the pool replaces a connection that a restart or
// pg_terminate_backend broke, and one broken connection is no outage.
func (p *Postgres) do(ctx context.Context, op string, idempotent bool, fn func(context.Context) error) error {
	if !p.up.Load() {
		p.m.errors.WithLabelValues(op).Inc()
		return errDown
	}
	limit := p.writeTimeout
	if idempotent {
		limit = p.readTimeout
	}
	bounded, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := fn(bounded)
	if err != nil && idempotent && bounded.Err() == nil && unreachable(err) {
		err = fn(bounded)
	}
	switch {
	case err == nil, errors.Is(err, ErrConflict), errors.Is(err, ErrTooLarge), errors.Is(err, errMalformed),
		errors.Is(err, ErrInvalidBlock), errors.Is(err, ErrNotCovered):
		return err
	case ctx.Err() != nil:
		return err // the caller gave up: nothing said about Postgres
	case bounded.Err() != nil:
		err = fmt.Errorf("no answer within %v: %w", limit, err)
	}
	p.m.errors.WithLabelValues(op).Inc()
	if unreachable(err) {
		p.down(err)
	}
	return redact(err)
}

// down records that Postgres failed; the first failure of an outage logs.
func (p *Postgres) down(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.up.Load() {
		return
	}
	p.up.Store(false)
	p.m.up.Set(0)
	p.downSince = time.Now()
	p.log.Warn("postgres unreachable: history reads fall through to the remotes", "err", redact(err))
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// recovered records that Postgres answered again.
func (p *Postgres) recovered() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.up.Load() {
		return
	}
	p.up.Store(true)
	p.m.up.Set(1)
	p.log.Info("postgres reachable again: history reads resume", "outage", time.Since(p.downSince).Round(time.Millisecond))
}

// probe pings Postgres every probeInterval while it is down, and every
// healthInterval while it is up (a failed check takes it down as a failed
// call does), until ctx ends (Close).
func (p *Postgres) probe(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	var idle time.Duration // since the last check while up
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-t.C:
		}
		if p.up.Load() {
			if idle += probeInterval; idle >= healthInterval {
				idle = 0
				_ = p.Ping(ctx) // a failure is recorded by do
			}
			continue
		}
		idle = 0
		ping, cancel := context.WithTimeout(ctx, connectTimeout)
		err := p.pool.Ping(ping)
		cancel()
		if err == nil {
			p.recovered()
		}
	}
}

// unreachable reports errors that mean Postgres cannot be used, as
// opposed to one statement failing on a working server.
func unreachable(err error) bool {
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrTooLarge) || errors.Is(err, errMalformed) || errors.Is(err, ErrNotCovered) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case len(pgErr.Code) >= 2 && pgErr.Code[:2] == "08": // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, cannot connect now
			pgErr.Code == "53300": // too many connections
			return true
		}
		return false
	}
	return true // transport errors, closed connections, timeouts
}

// redact drops what an error might carry of the connection string.
func redact(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		// The config it names holds the password; the cause does not.
		return fmt.Errorf("connect to %s:%d: %w", ce.Config.Host, ce.Config.Port, errors.Unwrap(ce))
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("invalid connection string")
	}
	return err
}

// beginWrite begins a write's transaction. The session's
// statement_timeout is the reads'; a write's statements (lock waits, COPY,
// DELETE) get the write timeout's. The caller defers rollback: it rolls
// back even when the caller gave up, but bounded, as the server may be
// why it failed; after Commit it does nothing.
func (c *Chain) beginWrite(ctx context.Context) (tx pgx.Tx, rollback func(), err error) {
	if tx, err = c.p.pool.Begin(ctx); err != nil {
		return nil, nil, err
	}
	rollback = func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.p.readTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true)`,
		milliseconds(statementTimeout(c.p.writeTimeout))); err != nil {
		rollback()
		return nil, nil, err
	}
	return tx, rollback, nil
}
