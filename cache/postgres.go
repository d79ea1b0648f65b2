package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresOptions configure a Postgres tier; zero fields take defaults.
type PostgresOptions struct {
	// MaxEntryBytes caps an entry's value (ErrTooLarge).
	MaxEntryBytes int
	// ReadTimeout bounds one Get, WriteTimeout one Set.
	ReadTimeout, WriteTimeout time.Duration
	// MaxAge and MaxRows are the chain's retention (Prune). MaxRows < 0:
	// no row limit.
	MaxAge  time.Duration
	MaxRows int64
	// PruneInterval is Run's period; PruneBatch the rows per DELETE.
	PruneInterval time.Duration
	PruneBatch    int
	// Ready gates the tier: while it reports false (the schema is not
	// migrated yet) Get misses and Set stores nothing, without an error.
	// nil: always ready.
	Ready func() bool
	// Logger gets Run's prune failures; nil: slog.Default().
	Logger *slog.Logger
}

// DB is what the tier needs of Postgres; *pgxpool.Pool has it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Postgres is the durable cache tier: one chain's settled answers in the
// table cache_entries (package migrations), which outlive a Redis flush
// or restart. It takes settled entries only (ErrNotSettled); which
// methods reach it is the orchestrator's choice (expensive ones: traces,
// eth_getProof). A row is written once and deleted by retention only
// (Prune, run by Run, which first opens a connection: the tier is not
// asked before). Every call is bounded (ReadTimeout, WriteTimeout);
// after a failure the tier does not ask Postgres for a short pause
// (ErrDown), so a stalled Postgres is a fast miss.
type Postgres struct {
	db      DB
	chainID int64
	opts    PostgresOptions
	out     outage
	log     *slog.Logger

	entries, bytes atomic.Int64 // as the last prune counted them
	// dialing is set while Run opens the first connection: the tier is
	// not asked meanwhile (connect).
	dialing atomic.Bool
}

var (
	_ Tier   = (*Postgres)(nil)
	_ Purger = (*Postgres)(nil)
	_ Sizer  = (*Postgres)(nil)
)

// NewPostgres returns chain chainID's cache tier on db. It does no I/O.
func NewPostgres(db DB, chainID uint64, opts PostgresOptions) *Postgres {
	opts = opts.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Postgres{db: db, chainID: int64(min(chainID, math.MaxInt64)), opts: opts,
		log: log.With("component", "cache", "tier", "postgres")}
}

func (o PostgresOptions) withDefaults() PostgresOptions {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&o.ReadTimeout, DefaultPostgresReadTimeout)
	set(&o.WriteTimeout, DefaultPostgresWriteTimeout)
	set(&o.MaxAge, DefaultPostgresMaxAge)
	set(&o.PruneInterval, DefaultPruneInterval)
	if o.MaxEntryBytes <= 0 {
		o.MaxEntryBytes = DefaultPostgresMaxEntryBytes
	}
	if o.MaxRows == 0 {
		o.MaxRows = DefaultPostgresMaxRows
	}
	if o.PruneBatch <= 0 {
		o.PruneBatch = DefaultPruneBatch
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	return o
}

// OpenPool returns a lazy pool on the database at url for the Postgres
// tiers of every chain, its connections bounded as the blockstore's are
// (3 s to connect). Its sessions commit without waiting for the WAL flush
// (synchronous_commit off): a crash may lose the last moments of cache
// writes, which are asked upstream again, and a Set costs a round trip
// instead of an fsync (docs/benchmarks-log.md). It fails only on a malformed url,
// whose text no error quotes.
func OpenPool(url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("cache: postgres url: invalid connection string")
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > poolConnectTimeout {
		cfg.ConnConfig.ConnectTimeout = poolConnectTimeout
	}
	// Set after connecting rather than as a startup parameter, which
	// PgBouncer refuses.
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		ctx, cancel := context.WithTimeout(ctx, poolConnectTimeout)
		defer cancel()
		_, err := conn.Exec(ctx, `SET synchronous_commit = off`)
		return err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: postgres pool: %w", err)
	}
	return pool, nil
}

// poolConnectTimeout bounds one connection attempt of OpenPool's pool.
const poolConnectTimeout = 3 * time.Second

// Name implements Tier.
func (p *Postgres) Name() string { return "postgres" }

// Get implements Tier; every entry it returns is settled.
func (p *Postgres) Get(ctx context.Context, k Key) (Entry, bool, error) {
	if !p.ready() {
		return Entry{}, false, nil
	}
	if err := p.out.allow(); err != nil {
		return Entry{}, false, fmt.Errorf("cache postgres get: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, p.opts.ReadTimeout)
	defer cancel()
	e := Entry{Settled: true}
	var block int64
	err := p.db.QueryRow(tctx, `SELECT method, block, error, value FROM cache_entries
		WHERE chain_id = $1 AND key = $2`, p.chainID, k[:]).Scan(&e.Method, &block, &e.Error, &e.Value)
	if errors.Is(err, pgx.ErrNoRows) {
		p.out.ok()
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, p.failed(ctx, tctx, "get", err)
	}
	p.out.ok()
	e.Block = uint64(max(block, 0))
	return e, true, nil
}

// Set implements Tier. ttl is ignored: a settled answer never changes,
// and the retention bounds the table. A key already stored is left as it
// is.
func (p *Postgres) Set(ctx context.Context, k Key, e Entry, _ time.Duration) error {
	switch {
	case !e.Settled:
		return ErrNotSettled
	case len(e.Value) > p.opts.MaxEntryBytes:
		return ErrTooLarge
	case !p.ready():
		return nil
	}
	if err := p.out.allow(); err != nil {
		return fmt.Errorf("cache postgres set: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, p.opts.WriteTimeout)
	defer cancel()
	_, err := p.db.Exec(tctx, `INSERT INTO cache_entries (chain_id, key, method, block, error, value)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (chain_id, key) DO NOTHING`,
		p.chainID, k[:], e.Method, int64(min(e.Block, math.MaxInt64)), e.Error, e.Value)
	if err != nil {
		return p.failed(ctx, tctx, "set", err)
	}
	p.out.ok()
	return nil
}

// ready reports whether Get and Set ask Postgres: the schema is migrated
// (Ready) and Run is not opening the first connection.
func (p *Postgres) ready() bool { return p.opts.Ready() && !p.dialing.Load() }

// Size implements Sizer with what the last prune counted: no I/O, so the
// gauges cost Postgres nothing; it lags by up to a prune interval.
func (p *Postgres) Size(context.Context) (entries, bytes int64, err error) {
	return p.entries.Load(), p.bytes.Load(), nil
}

// failed wraps a failed call's error and, unless the caller gave up
// (Postgres may be fine), starts the pause. A caller's deadline that
// passed first is Postgres's failure as much as the tier's own.
func (p *Postgres) failed(ctx, bounded context.Context, op string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("cache postgres %s: %w", op, ctx.Err())
	}
	if bounded.Err() != nil {
		err = fmt.Errorf("no answer in time: %w", err)
	}
	p.out.failed()
	return fmt.Errorf("cache postgres %s: %w", op, err)
}

// Purge implements Purger: it deletes the chain's rows p selects. The
// tier does not record remotes: a purge by remote deletes every row the
// rest of p selects (more than needed, never less; the answers are asked
// again).
func (p *Postgres) Purge(ctx context.Context, pu Purge) (int64, error) {
	if !p.ready() {
		return 0, nil
	}
	q := `DELETE FROM cache_entries WHERE chain_id = $1`
	args := []any{p.chainID}
	if pu.Method != "" {
		args = append(args, pu.Method)
		q += fmt.Sprintf(" AND method = $%d", len(args))
	}
	if pu.ranged() {
		args = append(args, int64(min(pu.From, math.MaxInt64)))
		q += fmt.Sprintf(" AND block <> 0 AND block >= $%d", len(args))
		if pu.To != 0 {
			args = append(args, int64(min(pu.To, math.MaxInt64)))
			q += fmt.Sprintf(" AND block <= $%d", len(args))
		}
	}
	if !pu.Since.IsZero() {
		args = append(args, pu.Since)
		q += fmt.Sprintf(" AND created_at >= $%d", len(args))
	}
	tag, err := p.db.Exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("cache postgres purge: %w", err)
	}
	return tag.RowsAffected(), nil
}
