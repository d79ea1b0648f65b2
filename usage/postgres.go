package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of a Writer.
const (
	DefaultFlushInterval = 10 * time.Second
	// batchRows bounds the rows of one statement.
	batchRows = 5000
	// flushTimeout bounds one flush.
	flushTimeout = 30 * time.Second
)

// Writer drains a Recorder into Postgres every flush interval, and once
// more at Stop. A failed flush gives the rows back to the Recorder, to be
// written by the next.
type Writer struct {
	pool  *pgxpool.Pool
	rec   *Recorder
	every time.Duration
	log   *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
}

// WriterOptions configure a Writer; zero fields take defaults.
type WriterOptions struct {
	FlushInterval time.Duration // default DefaultFlushInterval
	Logger        *slog.Logger
}

// NewWriter writes rec's rows to the usage table through pool. It does
// no I/O.
func NewWriter(pool *pgxpool.Pool, rec *Recorder, opts WriterOptions) *Writer {
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{pool: pool, rec: rec, every: opts.FlushInterval, log: opts.Logger}
}

// upsert adds a batch of rows, given as parallel arrays, to their rows in
// the table: a row is the sum of every replica's flushes.
const upsert = `
INSERT INTO usage_daily (day, tenant, chain, method, calls, credits, errors, bytes_out)
SELECT * FROM unnest($1::date[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
ON CONFLICT (tenant, day, chain, method) DO UPDATE SET
    calls = usage_daily.calls + EXCLUDED.calls,
    credits = usage_daily.credits + EXCLUDED.credits,
    errors = usage_daily.errors + EXCLUDED.errors,
    bytes_out = usage_daily.bytes_out + EXCLUDED.bytes_out`

// Flush writes what the Recorder holds, in one transaction: all of it or,
// on failure, none (given back for the next flush).
func (w *Writer) Flush(ctx context.Context) error {
	rows := w.rec.take()
	if len(rows) == 0 {
		return nil
	}
	if err := w.write(ctx, rows); err != nil {
		w.rec.giveBack(rows)
		w.rec.m.flushErrors.Inc()
		return fmt.Errorf("usage: write %d rows: %w", len(rows), err)
	}
	w.rec.m.written.Add(float64(len(rows)))
	return nil
}

func (w *Writer) write(ctx context.Context, rows map[rowKey]*counts) error {
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var b batch
	for k, c := range rows {
		b.add(k, c)
		if b.len() == batchRows {
			if _, err := tx.Exec(ctx, upsert, b.args()...); err != nil {
				return err
			}
			b = batch{}
		}
	}
	if b.len() > 0 {
		if _, err := tx.Exec(ctx, upsert, b.args()...); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// batch is rows as the columns unnest reads.
type batch struct {
	days                    []time.Time
	tenants, chains, methds []string
	calls, credits, errs, b []int64
}

func (b *batch) add(k rowKey, c *counts) {
	b.days = append(b.days, time.Unix(k.day*86400, 0).UTC())
	b.tenants = append(b.tenants, k.tenant)
	b.chains = append(b.chains, k.chain)
	b.methds = append(b.methds, k.method)
	b.calls = append(b.calls, c.calls)
	b.credits = append(b.credits, c.credits)
	b.errs = append(b.errs, c.errors)
	b.b = append(b.b, c.bytesOut)
}

func (b *batch) len() int { return len(b.days) }

func (b *batch) args() []any {
	return []any{b.days, b.tenants, b.chains, b.methds, b.calls, b.credits, b.errs, b.b}
}

// Start flushes every flush interval until Stop.
func (w *Writer) Start() {
	if w.cancel != nil {
		return
	}
	var ctx context.Context
	ctx, w.cancel = context.WithCancel(context.Background())
	w.done = make(chan struct{})
	go w.loop(ctx)
}

// Stop ends the flushes and writes what is left, within ctx.
func (w *Writer) Stop(ctx context.Context) error {
	if w.cancel == nil {
		return nil
	}
	w.cancel()
	<-w.done
	w.cancel = nil
	return w.Flush(ctx)
}

func (w *Writer) loop(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := w.Flush(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return // stopping: Stop flushes once more
		case err != nil && !failing:
			w.log.Warn("usage: cannot write to postgres; keeping the rows in memory", "err", err)
			failing = true
		case err == nil && failing:
			w.log.Info("usage: writing to postgres again")
			failing = false
		}
	}
}

// Query reads the usage rows of tenant ("" for every tenant) from day
// from to day to, both included, ordered by day, tenant, chain and method.
func Query(ctx context.Context, db interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, tenant string, from, to time.Time) ([]Row, error) {
	rows, err := db.Query(ctx, `
SELECT day, tenant, chain, method, calls, credits, errors, bytes_out FROM usage_daily
WHERE ($1 = '' OR tenant = $1) AND day BETWEEN $2::date AND $3::date
ORDER BY day, tenant, chain, method`, tenant, from.UTC().Format(time.DateOnly), to.UTC().Format(time.DateOnly))
	if err != nil {
		return nil, fmt.Errorf("usage: query: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var u Row
		err := r.Scan(&u.Day, &u.Tenant, &u.Chain, &u.Method, &u.Calls, &u.Credits, &u.Errors, &u.BytesOut)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("usage: query: %w", err)
	}
	return out, nil
}

// QueryURL is Query on the database at url, for a process that holds no
// pool of its own (venn usage).
func QueryURL(ctx context.Context, url, tenant string, from, to time.Time) ([]Row, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, errors.New("usage: postgres.url cannot be used (check its host and options)")
	}
	defer pool.Close()
	return Query(ctx, pool, tenant, from, to)
}
