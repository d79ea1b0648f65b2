package blockstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
)

// What the write-through and `venn history verify` ask of the store: how a
// block links to the stored ones, the stored blocks of a range, and the
// purge of blocks found on another chain. Put refuses a block that
// disagrees with a stored neighbour, but a block with none goes in: these
// let callers check what Put cannot.

// Operations of this file, the values of the op label.
const (
	opLinks = "links"
	opRefs  = "refs"
	opPurge = "purge"
)

// StoredRef is a stored block's number, hash and parent hash (0x-hex,
// lower case).
type StoredRef struct {
	Number       uint64
	Hash, Parent string
}

// Links reports whether the block number n with hash and parent links to
// the stored blocks by hash: the stored block n-1 is its parent, the
// stored block n+1 is its child, or it is stored already; and no stored
// neighbour disagrees. A block with no stored neighbour does not link.
func (c *Chain) Links(ctx context.Context, n uint64, hash, parent string) (bool, error) {
	h, err := unhex(hash, 32)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidBlock, err)
	}
	p, err := unhex(parent, 32)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidBlock, err)
	}
	if n >= math.MaxInt64 {
		return false, nil
	}
	lo := int64(n)
	if n > 0 {
		lo--
	}
	var linked bool
	err = c.do(ctx, opLinks, true, func(ctx context.Context) error {
		rows, err := c.p.pool.Query(ctx, `SELECT number, hash, parent FROM blocks
			WHERE chain_id = $1 AND number BETWEEN $2 AND $3`, c.id, lo, int64(n)+1)
		if err != nil {
			return err
		}
		var num int64
		var sh, sp []byte
		agree, disagree := 0, 0
		_, err = pgx.ForEachRow(rows, []any{&num, &sh, &sp}, func() error {
			var ok bool
			switch uint64(num) {
			case n - 1:
				ok = bytes.Equal(sh, p)
			case n:
				ok = bytes.Equal(sh, h)
			case n + 1:
				ok = bytes.Equal(sp, h)
			}
			if ok {
				agree++
			} else {
				disagree++
			}
			return nil
		})
		linked = agree > 0 && disagree == 0
		return err
	})
	return linked, err
}

// Refs returns the stored blocks numbered from..to, ascending, at most
// limit of them (the first ones).
func (c *Chain) Refs(ctx context.Context, from, to uint64, limit int) ([]StoredRef, error) {
	if from > to || from > math.MaxInt64 || limit <= 0 {
		return nil, nil
	}
	to = min(to, math.MaxInt64)
	var out []StoredRef
	err := c.do(ctx, opRefs, true, func(ctx context.Context) error {
		out = out[:0]
		rows, err := c.p.pool.Query(ctx, `SELECT number, hash, parent FROM blocks
			WHERE chain_id = $1 AND number BETWEEN $2 AND $3 ORDER BY number LIMIT $4`,
			c.id, int64(from), int64(to), limit)
		if err != nil {
			return err
		}
		var num int64
		var h, p []byte
		_, err = pgx.ForEachRow(rows, []any{&num, &h, &p}, func() error {
			out = append(out, StoredRef{Number: uint64(num), Hash: hex0x(h), Parent: hex0x(p)})
			return nil
		})
		return err
	})
	return out, err
}

// Purged is what Purge removed.
type Purged struct {
	Blocks, Transactions, Logs int64
	// Uncovered are the ranges no longer marked stored, ascending.
	Uncovered []Range
}

// Purge removes the given stored blocks, each only while it is still
// stored under that hash, with their transactions and logs, and takes
// their numbers out of the coverage, all in one transaction. It takes the
// locks Put takes, so a Put of the same or neighbouring blocks runs wholly
// before or after it.
func (c *Chain) Purge(ctx context.Context, blocks []StoredRef) (Purged, error) {
	rows := make([]*blockRows, 0, len(blocks))
	for _, b := range blocks {
		h, err := unhex(b.Hash, 32)
		if err != nil {
			return Purged{}, fmt.Errorf("%w: block %d: %w", ErrInvalidBlock, b.Number, err)
		}
		if b.Number > math.MaxInt64 {
			return Purged{}, fmt.Errorf("%w: block number %d out of range", ErrInvalidBlock, b.Number)
		}
		rows = append(rows, &blockRows{number: b.Number, hash: h})
	}
	rows = ascendingUnique(rows)
	if len(rows) == 0 {
		return Purged{}, nil
	}
	var out Purged
	err := c.do(ctx, opPurge, false, func(ctx context.Context) error {
		var err error
		out, err = c.purge(ctx, rows)
		return err
	})
	return out, err
}

func (c *Chain) purge(ctx context.Context, rows []*blockRows) (Purged, error) {
	var out Purged
	tx, rollback, err := c.beginWrite(ctx)
	if err != nil {
		return out, err
	}
	defer rollback()

	// Put's order: the range locks, then the chain's lock.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`, c.rangeLocks(rows)); err != nil {
		return out, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, c.lockKey); err != nil {
		return out, err
	}
	nums := make([]int64, len(rows))
	hashes := make([][]byte, len(rows))
	for i, r := range rows {
		nums[i], hashes[i] = int64(r.number), r.hash
	}
	res, err := tx.Query(ctx, `DELETE FROM blocks b USING unnest($2::bigint[], $3::bytea[]) AS g(n, h)
		WHERE b.chain_id = $1 AND b.number = g.n AND b.hash = g.h RETURNING b.number`, c.id, nums, hashes)
	if err != nil {
		return out, fmt.Errorf("delete blocks: %w", err)
	}
	var gone []int64
	var n int64
	if _, err := pgx.ForEachRow(res, []any{&n}, func() error { gone = append(gone, n); return nil }); err != nil {
		return out, fmt.Errorf("delete blocks: %w", err)
	}
	if len(gone) == 0 {
		return out, nil
	}
	out.Blocks = int64(len(gone))
	tag, err := tx.Exec(ctx, `DELETE FROM transactions WHERE chain_id = $1 AND block_number = ANY($2)`, c.id, gone)
	if err != nil {
		return out, fmt.Errorf("delete transactions: %w", err)
	}
	out.Transactions = tag.RowsAffected()
	if tag, err = tx.Exec(ctx, `DELETE FROM logs WHERE chain_id = $1 AND block_number = ANY($2)`, c.id, gone); err != nil {
		return out, fmt.Errorf("delete logs: %w", err)
	}
	out.Logs = tag.RowsAffected()
	deleted := make([]*blockRows, len(gone))
	for i, g := range gone {
		deleted[i] = &blockRows{number: uint64(g)}
	}
	for _, run := range runs(ascendingUnique(deleted)) {
		r := Range{From: run[0].number, To: run[len(run)-1].number}
		if err := c.uncover(ctx, tx, r); err != nil {
			return out, err
		}
		out.Uncovered = append(out.Uncovered, r)
	}
	return out, tx.Commit(ctx)
}

// uncover takes r out of the coverage: a range it cuts keeps its parts
// below and above r.
func (c *Chain) uncover(ctx context.Context, tx pgx.Tx, r Range) error {
	_, err := tx.Exec(ctx, `
WITH gone AS (
	DELETE FROM coverage
	WHERE chain_id = $1 AND from_block <= $3 AND to_block >= $2
	RETURNING from_block, to_block
)
INSERT INTO coverage (chain_id, from_block, to_block)
SELECT $1, from_block, $2 - 1 FROM gone WHERE from_block < $2
UNION ALL
SELECT $1, $3 + 1, to_block FROM gone WHERE to_block > $3`, c.id, int64(r.From), int64(r.To))
	if err != nil {
		return fmt.Errorf("coverage: %w", err)
	}
	return nil
}

// ascendingUnique sorts rows by number and drops repeated numbers.
func ascendingUnique(rows []*blockRows) []*blockRows {
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b *blockRows) int { return cmp.Compare(a.number, b.number) })
	out := sorted[:0]
	for _, r := range sorted {
		if len(out) > 0 && out[len(out)-1].number == r.number {
			continue
		}
		out = append(out, r)
	}
	return out
}

func hex0x(b []byte) string { return "0x" + hex.EncodeToString(b) }
