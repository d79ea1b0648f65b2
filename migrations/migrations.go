// Package migrations holds venn's Postgres schema as embedded SQL files and
// applies them with goose: every file in order, each in its own
// transaction, under a session advisory lock so that replicas starting
// together apply each version once. goose records the versions applied in
// its table, goose_db_version.
//
// The package holds the schema and nothing else; the blockstore applies it
// (blockstore.History) and reads and writes the tables.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver goose runs on
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sql/*.sql
var files embed.FS

// LockID is the Postgres advisory lock held while migrating: crc32 of
// "venn migrations", distinct from goose's default so that another goose
// user of the same database does not wait on venn or the other way round.
const LockID int64 = 0xc5cc1286

// Bounds of the wait for the lock: another replica may be migrating.
const (
	lockPollSeconds = 1   // pg_try_advisory_lock every second
	lockPolls       = 300 // for up to five minutes
	unlockPolls     = 30
)

// Up applies every embedded migration not yet applied, under a Postgres
// advisory lock; versions are tracked in goose's table. It returns the
// versions it applied (none when the schema is current).
func Up(ctx context.Context, url string, log *slog.Logger) (applied []int64, err error) {
	p, err := provider(url, log)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	res, err := p.Up(ctx)
	for _, r := range res {
		if r.Error == nil {
			applied = append(applied, r.Source.Version)
		}
	}
	if err != nil {
		return applied, fmt.Errorf("migrate: %w", err)
	}
	return applied, nil
}

// UpTo applies the embedded migrations up to and including version, as Up
// does: a test fills a store of an older schema with it and then migrates
// the rest.
func UpTo(ctx context.Context, url string, version int64, log *slog.Logger) error {
	p, err := provider(url, log)
	if err != nil {
		return err
	}
	defer p.Close()
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func provider(url string, log *slog.Logger) (*goose.Provider, error) {
	fsys, err := fs.Sub(files, "sql")
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("migrate: open: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(LockID),
		lock.WithLockTimeout(lockPollSeconds, lockPolls),
		lock.WithUnlockTimeout(lockPollSeconds, unlockPolls),
	)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, opts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}
