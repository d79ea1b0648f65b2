package blockstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/venn-gateway/venn/evm"
)

// putAttempts bounds Put's retries of a transaction that lost a race with a
// concurrent Put (unique violation, deadlock); the range locks make that
// rare.
const putAttempts = 3

// lockSpan is how many consecutive block numbers one range lock covers.
const lockSpan = 128

// Put stores settled blocks with their receipts in one transaction (COPY),
// marks their numbers covered (merging ranges), is idempotent (a block
// already stored under the same hash is skipped) and refuses with
// ErrConflict, storing nothing, a batch holding a block that disagrees
// with a stored block: another hash at its number, or a parent link to a
// stored or batched neighbour that does not hold. ErrInvalidBlock: a block
// it cannot store. Any other error: Postgres failed.
func (c *Chain) Put(ctx context.Context, blocks []*evm.Block) error {
	rows, err := prepare(blocks)
	if err != nil || len(rows) == 0 {
		return err
	}
	return c.do(ctx, opPut, false, func(ctx context.Context) error {
		for attempt := 1; ; attempt++ {
			if err := c.ensurePartitions(ctx, rows); err != nil {
				return err
			}
			n, err := c.put(ctx, rows)
			if err == nil {
				c.p.m.blocks.Add(float64(n))
				return nil
			}
			if attempt == putAttempts || !raced(err) {
				return err
			}
		}
	})
}

// prepare encodes the batch, ascending and without repeats, and checks the
// links between its own blocks.
func prepare(blocks []*evm.Block) ([]*blockRows, error) {
	rows := make([]*blockRows, 0, len(blocks))
	for _, b := range blocks {
		r, err := encode(b)
		if err != nil {
			return nil, fmt.Errorf("%w: block %d: %w", ErrInvalidBlock, b.Number, err)
		}
		if r.number > maxBlockNumber {
			return nil, fmt.Errorf("%w: block number %d out of range", ErrInvalidBlock, r.number)
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b *blockRows) int {
		switch {
		case a.number < b.number:
			return -1
		case a.number > b.number:
			return 1
		}
		return 0
	})
	out := rows[:0]
	for _, r := range rows {
		if len(out) > 0 {
			last := out[len(out)-1]
			switch {
			case last.number == r.number && bytes.Equal(last.hash, r.hash):
				continue
			case last.number == r.number:
				return nil, fmt.Errorf("%w: two blocks %d in the batch", ErrConflict, r.number)
			case last.number+1 == r.number && !bytes.Equal(last.hash, r.parent):
				return nil, fmt.Errorf("%w: block %d's parent is not the batch's block %d", ErrConflict, r.number, last.number)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// put runs one attempt of Put and returns how many blocks it stored.
func (c *Chain) put(ctx context.Context, rows []*blockRows) (int, error) {
	tx, rollback, err := c.beginWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer rollback()

	// Partitions are not dropped under the write (retention waits), and
	// those ensurePartitions found are still there.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, c.partitionLock()); err != nil {
		return 0, err
	}
	if err := c.checkPartitions(ctx, tx, rows); err != nil {
		return 0, err
	}

	// Puts of the same or neighbouring blocks take turns from here on, so
	// that the second sees what the first stored; Puts of distant ranges
	// run side by side.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k`, c.rangeLocks(rows)); err != nil {
		return 0, err
	}
	nums := make([]int64, len(rows))
	for i, r := range rows {
		nums[i] = int64(r.number)
	}
	stored, err := c.stored(ctx, tx, nums)
	if err != nil {
		return 0, err
	}
	fresh := make([]*blockRows, 0, len(rows))
	for _, r := range rows {
		s, ok := stored[int64(r.number)]
		switch {
		case !ok:
			fresh = append(fresh, r)
		case !bytes.Equal(s.hash, r.hash):
			return 0, fmt.Errorf("%w: block %d is stored with another hash", ErrConflict, r.number)
		}
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	if err := c.copy(ctx, tx, fresh); err != nil {
		return 0, err
	}
	// The checks of stored neighbours and the coverage merge see every Put
	// of the chain committed before this one takes the chain's lock.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, c.lockKey); err != nil {
		return 0, err
	}
	if err := c.checkEdges(ctx, tx, fresh); err != nil {
		return 0, err
	}
	for _, run := range runs(rows) {
		if err := c.cover(ctx, tx, run); err != nil {
			return 0, err
		}
	}
	return len(fresh), tx.Commit(ctx)
}

type storedBlock struct{ hash, parent []byte }

// stored returns the stored blocks at nums.
func (c *Chain) stored(ctx context.Context, tx pgx.Tx, nums []int64) (map[int64]storedBlock, error) {
	rs, err := tx.Query(ctx, `SELECT number, hash, parent FROM blocks WHERE chain_id = $1 AND number = ANY($2)`, c.id, nums)
	if err != nil {
		return nil, err
	}
	out := map[int64]storedBlock{}
	var n int64
	var b storedBlock
	_, err = pgx.ForEachRow(rs, []any{&n, &b.hash, &b.parent}, func() error {
		out[n] = b
		b = storedBlock{}
		return nil
	})
	return out, err
}

// copy writes the rows of fresh blocks.
func (c *Chain) copy(ctx context.Context, tx pgx.Tx, fresh []*blockRows) error {
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"blocks"},
		[]string{"chain_id", "number", "hash", "parent", "time", "shell", "full_json"},
		pgx.CopyFromSlice(len(fresh), func(i int) ([]any, error) {
			r := fresh[i]
			return []any{c.id, int64(r.number), r.hash, r.parent, int64(r.time), r.shell, r.full}, nil
		}))
	if err != nil {
		return fmt.Errorf("copy blocks: %w", err)
	}
	var txs, logs [][]any
	for _, r := range fresh {
		for i, t := range r.txs {
			txs = append(txs, []any{c.id, int64(r.number), int32(i), t.hash, t.tx, t.receipt})
		}
		for i, l := range r.logs {
			row := []any{c.id, int64(r.number), int32(i), int32(l.txIndex), r.txs[l.txIndex].hash, l.address, nil, nil, nil, nil, l.log}
			for k, t := range l.topics {
				if t != nil {
					row[6+k] = t
				}
			}
			logs = append(logs, row)
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"transactions"},
		[]string{"chain_id", "block_number", "idx", "hash", "tx", "receipt"}, pgx.CopyFromRows(txs)); err != nil {
		return fmt.Errorf("copy transactions: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"logs"},
		[]string{"chain_id", "block_number", "log_index", "tx_index", "tx_hash", "address", "topic0", "topic1", "topic2", "topic3", "log"},
		pgx.CopyFromRows(logs)); err != nil {
		return fmt.Errorf("copy logs: %w", err)
	}
	return nil
}

// checkEdges checks the links between fresh blocks and the stored blocks
// next to them.
func (c *Chain) checkEdges(ctx context.Context, tx pgx.Tx, fresh []*blockRows) error {
	type edge struct {
		below bool // the stored block is below the run: its hash must be the parent
		r     *blockRows
	}
	edges := map[int64][]edge{}
	var nums []int64
	add := func(n int64, e edge) {
		if len(edges[n]) == 0 {
			nums = append(nums, n)
		}
		edges[n] = append(edges[n], e)
	}
	for _, run := range runs(fresh) {
		first, last := run[0], run[len(run)-1]
		if first.number > 0 {
			add(int64(first.number)-1, edge{below: true, r: first})
		}
		if last.number < math.MaxInt64 {
			add(int64(last.number)+1, edge{r: last})
		}
	}
	stored, err := c.stored(ctx, tx, nums)
	if err != nil {
		return err
	}
	for n, s := range stored {
		for _, e := range edges[n] {
			switch {
			case e.below && !bytes.Equal(s.hash, e.r.parent):
				return fmt.Errorf("%w: block %d's parent is not the stored block %d", ErrConflict, e.r.number, n)
			case !e.below && !bytes.Equal(s.parent, e.r.hash):
				return fmt.Errorf("%w: the stored block %d's parent is not block %d", ErrConflict, n, e.r.number)
			}
		}
	}
	return nil
}

// cover marks a run of consecutive stored blocks covered, merged with the
// ranges it overlaps or touches.
func (c *Chain) cover(ctx context.Context, tx pgx.Tx, run []*blockRows) error {
	from, to := int64(run[0].number), int64(run[len(run)-1].number)
	_, err := tx.Exec(ctx, `
WITH gone AS (
	DELETE FROM coverage
	WHERE chain_id = $1 AND from_block <= $3 + 1 AND to_block >= $2 - 1
	RETURNING from_block, to_block
)
INSERT INTO coverage (chain_id, from_block, to_block)
SELECT $1, LEAST($2, min(from_block)), GREATEST($3, max(to_block)) FROM gone`, c.id, from, to)
	if err != nil {
		return fmt.Errorf("coverage: %w", err)
	}
	return nil
}

// rangeLocks returns the advisory lock keys of the spans holding ascending
// rows and their neighbours, sorted: taken in that order, they cannot
// deadlock.
func (c *Chain) rangeLocks(rows []*blockRows) []int64 {
	var keys []int64
	for _, run := range runs(rows) {
		from, to := run[0].number, run[len(run)-1].number
		if from > 0 {
			from--
		}
		for span := from / lockSpan; span <= (to+1)/lockSpan; span++ {
			h := fnv.New64a()
			fmt.Fprintf(h, "venn blockstore range %d %d", c.id, span)
			keys = append(keys, int64(h.Sum64()))
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// runs splits ascending rows into runs of consecutive numbers.
func runs(rows []*blockRows) [][]*blockRows {
	var out [][]*blockRows
	start := 0
	for i := 1; i <= len(rows); i++ {
		if i == len(rows) || rows[i].number != rows[i-1].number+1 {
			out = append(out, rows[start:i])
			start = i
		}
	}
	return out
}

// raced reports errors from losing a race with a concurrent Put (or a
// retention that dropped a partition), after which a new attempt sees what
// the other one did.
func raced(err error) bool {
	if errors.Is(err, errPartitionGone) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "23505", "40P01", "40001": // unique violation, deadlock, serialization
		return true
	}
	return false
}
