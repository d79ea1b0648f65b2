package blockstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// DefaultPartitionBlocks is the block range of one partition when a chain
// does not set its own: two weeks of Ethereum mainnet, a few tens of
// millions of logs of a busy chain, small enough to index, vacuum and drop
// whole.
const DefaultPartitionBlocks = 100_000

// MinPartitionBlocks bounds Policy.PartitionBlocks from below: every
// partition is three tables, and a chain must not make thousands a day.
const MinPartitionBlocks = 1000

// maxBlockNumber is the highest block number the store holds: partition
// bounds are exclusive, and an int64 one above it must exist.
const maxBlockNumber = math.MaxInt64 - 1

// Policy is how one chain's history is kept.
type Policy struct {
	// PartitionBlocks is the block range of a new partition; 0:
	// DefaultPartitionBlocks. Partitions made before keep their range.
	PartitionBlocks uint64
	// KeepBlocks keeps only the newest KeepBlocks blocks below the highest
	// stored one, dropping older partitions whole; 0 keeps everything.
	KeepBlocks uint64
}

// errPartitionGone: a partition Put had made was dropped before Put wrote
// to it (retention on another replica). Put makes it again and retries.
var errPartitionGone = errors.New("blockstore: partition dropped under a write")

// partitions is what a chain knows of its partitions: the ranges that
// existed when it last looked. Put consults it before every write and asks
// Postgres only for a block outside them; a range dropped since is caught
// in Put's transaction.
type partitions struct {
	mu    sync.Mutex
	known []partRange // ascending, not overlapping
}

// partRange is a partition's [from, to) of block numbers.
type partRange struct{ from, to int64 }

func (pr partRange) holds(n int64) bool { return pr.from <= n && n < pr.to }

// missing returns the numbers of nums (ascending) that no known partition
// holds.
func (ps *partitions) missing(nums []int64) []int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []int64
	for _, n := range nums {
		i, _ := slices.BinarySearchFunc(ps.known, n, func(pr partRange, n int64) int {
			switch {
			case pr.to <= n:
				return -1
			case pr.from > n:
				return 1
			}
			return 0
		})
		if i == len(ps.known) || !ps.known[i].holds(n) {
			out = append(out, n)
		}
	}
	return out
}

func (ps *partitions) set(known []partRange) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.known = known
}

// forget drops what is known, so that the next Put asks Postgres.
func (ps *partitions) forget() { ps.set(nil) }

// partitionLock returns the advisory lock that orders the making and
// dropping of the chain's partitions (held exclusively) with the writes
// into them (held shared).
func (c *Chain) partitionLock() int64 { return c.lockKey ^ 0x7061727469 }

// ensurePartitions makes sure partitions exist for every block of rows
// and for the range after the highest, so that the next Puts, which
// usually write the blocks after these, find theirs made. Partitions are
// made in a transaction of their own, which holds a lock of the parent
// tables only briefly; Put's transaction checks they still exist.
func (c *Chain) ensurePartitions(ctx context.Context, rows []*blockRows) error {
	nums := make([]int64, 0, len(rows)+1)
	for _, r := range rows {
		nums = append(nums, int64(r.number))
	}
	if top := nums[len(nums)-1]; top <= maxBlockNumber-int64(c.span) {
		nums = append(nums, top+int64(c.span)) // ahead of the writes
	}
	nums = slices.Compact(nums)
	need := c.parts.missing(nums)
	if len(need) == 0 {
		return nil
	}
	tx, rollback, err := c.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer rollback()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, c.partitionLock()); err != nil {
		return err
	}
	known, err := c.loadPartitions(ctx, tx)
	if err != nil {
		return err
	}
	made := false
	for _, n := range need {
		pr, ok := newPartition(known, n, int64(c.span))
		if !ok {
			continue // made for an earlier number of need
		}
		if _, err := tx.Exec(ctx, `SELECT venn_history_partition($1, $2, $3)`, c.id, pr.from, pr.to); err != nil {
			return fmt.Errorf("make partition %d..%d: %w", pr.from, pr.to-1, err)
		}
		known = insertRange(known, pr)
		made = true
	}
	if made {
		if err := tx.Commit(ctx); err != nil {
			return err
		}
	}
	c.parts.set(known)
	return nil
}

// loadPartitions reads the chain's partitions, ascending.
func (c *Chain) loadPartitions(ctx context.Context, q pgx.Tx) ([]partRange, error) {
	rows, err := q.Query(ctx, `SELECT from_block, to_block FROM history_partitions WHERE chain_id = $1 ORDER BY from_block`, c.id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (partRange, error) {
		var pr partRange
		err := row.Scan(&pr.from, &pr.to)
		return pr, err
	})
}

// newPartition returns the partition to make for block n: the span of
// span blocks n falls in, cut short where it would overlap a partition
// made before (of another span); ok is false when one holds n already.
func newPartition(known []partRange, n, span int64) (partRange, bool) {
	pr := partRange{from: n - n%span}
	pr.to = pr.from + min(span, math.MaxInt64-pr.from)
	for _, k := range known {
		switch {
		case k.holds(n):
			return partRange{}, false
		case k.to <= n:
			pr.from = max(pr.from, k.to)
		case k.from > n:
			pr.to = min(pr.to, k.from)
		}
	}
	return pr, true
}

func insertRange(known []partRange, pr partRange) []partRange {
	i, _ := slices.BinarySearchFunc(known, pr.from, func(k partRange, from int64) int {
		switch {
		case k.from < from:
			return -1
		case k.from > from:
			return 1
		}
		return 0
	})
	return slices.Insert(known, i, pr)
}

// checkPartitions verifies, in a Put's transaction holding the partition
// lock shared, that the partitions of rows still exist.
func (c *Chain) checkPartitions(ctx context.Context, tx pgx.Tx, rows []*blockRows) error {
	lo, hi := int64(rows[0].number), int64(rows[len(rows)-1].number)
	rs, err := tx.Query(ctx, `SELECT from_block, to_block FROM history_partitions
		WHERE chain_id = $1 AND to_block > $2 AND from_block <= $3 ORDER BY from_block`, c.id, lo, hi)
	if err != nil {
		return err
	}
	have, err := pgx.CollectRows(rs, func(row pgx.CollectableRow) (partRange, error) {
		var pr partRange
		err := row.Scan(&pr.from, &pr.to)
		return pr, err
	})
	if err != nil {
		return err
	}
	for _, r := range rows {
		n := int64(r.number)
		if !slices.ContainsFunc(have, func(pr partRange) bool { return pr.holds(n) }) {
			c.parts.forget()
			return errPartitionGone
		}
	}
	return nil
}
