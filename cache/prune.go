package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Retention runs in its own loop (Run) rather than on writes: a Set is one
// INSERT on a call's path, bounded and cheap, and the deletes run off it,
// in batches of PruneBatch rows, FOR UPDATE SKIP LOCKED so that the
// replicas pruning one chain at once take disjoint rows instead of
// waiting on each other.

// Run connects (connect), then prunes the chain's rows at once and every
// PruneInterval until ctx ends; a failed prune is tried again at the next
// tick, and logged when it is the first to fail since one succeeded. It
// returns ctx's error.
func (p *Postgres) Run(ctx context.Context) error {
	if err := p.connect(ctx); err != nil {
		return err
	}
	t := time.NewTicker(p.opts.PruneInterval)
	defer t.Stop()
	failing := false
	for {
		_, err := p.Prune(ctx)
		switch {
		case err == nil:
			failing = false
		case ctx.Err() == nil && !failing:
			failing = true
			p.log.Warn("cache prune failed; retrying every interval", "err", err, "interval", p.opts.PruneInterval)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Prune applies the retention once: it deletes the chain's rows older than
// MaxAge, then, past MaxRows, its oldest; and it counts what is left for
// Size. It returns the rows deleted.
func (p *Postgres) Prune(ctx context.Context) (int64, error) {
	if !p.opts.Ready() {
		return 0, nil
	}
	if err := p.out.allow(); err != nil {
		return 0, fmt.Errorf("cache postgres prune: %w", err)
	}
	deleted, err := p.deleteBatches(ctx, `created_at < now() - make_interval(secs => $3)`,
		p.opts.MaxAge.Seconds())
	if err != nil {
		return deleted, err
	}
	n, err := p.count(ctx)
	if err != nil || p.opts.MaxRows < 0 || n <= p.opts.MaxRows {
		return deleted, err
	}
	var cut time.Time
	err = p.stmt(ctx, "prune", func(ctx context.Context) error {
		return p.db.QueryRow(ctx, `SELECT created_at FROM cache_entries WHERE chain_id = $1
			ORDER BY created_at DESC OFFSET $2 LIMIT 1`, p.chainID, p.opts.MaxRows).Scan(&cut)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return deleted, nil // another replica pruned meanwhile
	}
	if err != nil {
		return deleted, err
	}
	more, err := p.deleteBatches(ctx, `created_at <= $3`, cut)
	deleted += more
	if err != nil {
		return deleted, err
	}
	_, err = p.count(ctx)
	return deleted, err
}

// deleteBatches deletes the chain's rows matching cond (its $3 is arg), a
// batch per statement, until a batch comes back short.
func (p *Postgres) deleteBatches(ctx context.Context, cond string, arg any) (int64, error) {
	q := `DELETE FROM cache_entries WHERE ctid IN (SELECT ctid FROM cache_entries
		WHERE chain_id = $1 AND ` + cond + ` LIMIT $2 FOR UPDATE SKIP LOCKED)`
	var total int64
	for {
		var n int64
		err := p.stmt(ctx, "prune", func(ctx context.Context) error {
			tag, err := p.db.Exec(ctx, q, p.chainID, p.opts.PruneBatch, arg)
			n = tag.RowsAffected()
			return err
		})
		total += n
		if err != nil || n < int64(p.opts.PruneBatch) {
			return total, err
		}
	}
}

// count counts the chain's rows and their bytes, for Size.
func (p *Postgres) count(ctx context.Context) (int64, error) {
	var n, b int64
	err := p.stmt(ctx, "count", func(ctx context.Context) error {
		return p.db.QueryRow(ctx, `SELECT count(*), coalesce(sum(octet_length(value)), 0)
			FROM cache_entries WHERE chain_id = $1`, p.chainID).Scan(&n, &b)
	})
	if err != nil {
		return 0, err
	}
	p.entries.Store(n)
	p.bytes.Store(b)
	return n, nil
}

// connect opens the pool's first connection before the tier is asked
// (dialing marks it so until then: Get misses and Set stores nothing,
// without asking). A lazy pool dials on its first query, and a call's Get
// that spent its read bound (a few hundred ms) dialing, as a loaded
// machine may, would be a false outage: the store error counted, the
// outage logged, the tier paused, and the answer not stored. Prune keeps
// the connection in use from then on. Postgres down at the start: tried
// again with a backoff up to PruneInterval, the first failure logged.
func (p *Postgres) connect(ctx context.Context) error {
	p.dialing.Store(true)
	defer p.dialing.Store(false) // ctx ended: asked as before, each failure counted
	backoff := outagePause
	for logged := false; ; {
		tctx, cancel := context.WithTimeout(ctx, poolConnectTimeout)
		_, err := p.db.Exec(tctx, `SELECT 1`)
		cancel()
		if err == nil {
			p.log.Info("cache tier connected")
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !logged {
			logged = true
			p.log.Warn("cache tier cannot connect; its lookups are misses until it does", "err", err, "retry_in", backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, p.opts.PruneInterval)
	}
}

// pruneTimeout bounds one statement of a prune: it runs off the calls'
// path, and the count reads every row of the chain.
const pruneTimeout = 30 * time.Second

// stmt runs one statement of a prune under pruneTimeout; ErrNoRows passes
// through as it is.
func (p *Postgres) stmt(ctx context.Context, op string, fn func(context.Context) error) error {
	tctx, cancel := context.WithTimeout(ctx, pruneTimeout)
	defer cancel()
	err := fn(tctx)
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return p.failed(ctx, tctx, op, err)
}
