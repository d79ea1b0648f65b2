package blockstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// retentionLockTimeout bounds retention's wait for the locks of the tables
// it drops: dropping a partition locks its parent table, and reads of
// every chain queue behind a lock that is waited for. Retention gives up
// instead and runs again with a Put retentionRetryDelay later.
const retentionLockTimeout = "1s"

// Retain drops the chain's partitions that lie wholly below its newest
// KeepBlocks blocks (the highest covered block counting as the newest),
// and moves the coverage above them in the same transaction, so that no
// read sees a range covered whose rows are gone. It returns the ranges
// dropped (whole partitions); without KeepBlocks it does nothing.
func (c *Chain) Retain(ctx context.Context) (dropped []Range, err error) {
	if c.keep == 0 {
		return nil, nil
	}
	err = c.do(ctx, opRetain, false, func(ctx context.Context) error {
		var err error
		dropped, err = c.retain(ctx)
		return err
	})
	return dropped, err
}

func (c *Chain) retain(ctx context.Context) ([]Range, error) {
	tx, rollback, err := c.beginWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer rollback()
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, retentionLockTimeout); err != nil {
		return nil, err
	}
	// No Put writes into a partition being dropped, nor merges coverage
	// while it is moved.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1), pg_advisory_xact_lock($2)`, c.partitionLock(), c.lockKey); err != nil {
		return nil, err
	}
	var top *int64
	if err := tx.QueryRow(ctx, `SELECT max(to_block) FROM coverage WHERE chain_id = $1`, c.id).Scan(&top); err != nil {
		return nil, err
	}
	if top == nil || uint64(*top) < c.keep {
		return nil, nil
	}
	floor := *top - int64(c.keep) + 1 // the oldest block kept
	rows, err := tx.Query(ctx, `SELECT from_block, to_block FROM history_partitions
		WHERE chain_id = $1 AND to_block <= $2 ORDER BY from_block`, c.id, floor)
	if err != nil {
		return nil, err
	}
	gone, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (partRange, error) {
		var pr partRange
		err := row.Scan(&pr.from, &pr.to)
		return pr, err
	})
	if err != nil || len(gone) == 0 {
		return nil, err
	}
	cut := gone[len(gone)-1].to // every block below it goes
	if _, err := tx.Exec(ctx, `DELETE FROM coverage WHERE chain_id = $1 AND to_block < $2`, c.id, cut); err != nil {
		return nil, fmt.Errorf("coverage: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE coverage SET from_block = $2 WHERE chain_id = $1 AND from_block < $2`, c.id, cut); err != nil {
		return nil, fmt.Errorf("coverage: %w", err)
	}
	out := make([]Range, 0, len(gone))
	for _, pr := range gone {
		for _, t := range []string{"logs", "transactions", "blocks"} {
			name := pgx.Identifier{fmt.Sprintf("%s_c%d_%d", t, c.id, pr.from)}.Sanitize()
			if _, err := tx.Exec(ctx, `DROP TABLE `+name); err != nil {
				return nil, fmt.Errorf("drop partition %d..%d: %w", pr.from, pr.to-1, err)
			}
		}
		out = append(out, Range{From: uint64(pr.from), To: uint64(pr.to - 1)})
	}
	if _, err := tx.Exec(ctx, `DELETE FROM history_partitions WHERE chain_id = $1 AND to_block <= $2`, c.id, cut); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	c.parts.forget()
	return out, nil
}
