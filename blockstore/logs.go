package blockstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/venn-gateway/venn/evm"
)

// answerLogs: eth_getLogs by a stored block's hash, or over a range wholly
// covered.
func (c *Chain) answerLogs(ctx context.Context, r *evm.Call) (json.RawMessage, bool, error) {
	f := &r.Filter
	from, to := f.From.Number, f.To.Number
	if f.ByHash {
		var n int64
		h, _ := hex.DecodeString(string(f.Hash[2:]))
		err := c.p.pool.QueryRow(ctx, `SELECT number FROM blocks WHERE chain_id = $1 AND hash = $2`, c.id, h).Scan(&n)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		from, to = uint64(n), uint64(n)
	} else if to > math.MaxInt64 || from > to {
		return nil, false, nil
	}
	res, err := c.logs(ctx, f, from, to)
	if errors.Is(err, ErrNotCovered) {
		return nil, false, nil
	}
	return res, err == nil, err
}

// coveredGuard is the condition that [$2, $3] is covered, checked in the
// statement that reads the logs: coverage and rows are then of one
// snapshot, and retention, which drops both in one transaction, is either
// all seen or not at all.
const coveredGuard = `EXISTS (SELECT 1 FROM coverage WHERE chain_id = $1 AND from_block <= $2 AND to_block >= $3)`

// Logs returns the logs in [from, to] matching the eth_getLogs filter
// object (its address and topics; its block fields are ignored) as a JSON
// array in (block, logIndex) order, the node's bytes. ErrNotCovered: the
// range is not stored completely. ErrTooLarge: the answer would pass
// 128 MiB.
func (c *Chain) Logs(ctx context.Context, f *evm.LogFilter, from, to uint64) (json.RawMessage, error) {
	if from > to || to > math.MaxInt64 {
		return resultEmptyList, nil
	}
	var res json.RawMessage
	err := c.do(ctx, opLogs, true, func(ctx context.Context) error {
		var err error
		res, err = c.logs(ctx, f, from, to)
		return err
	})
	return res, err
}

// logs queries the logs f matches in [from, to], which must be covered.
// Wildcard positions still need the log to have a topic there. Logs
// found were read with their coverage; no log found takes a second
// statement to tell an empty answer from a range not covered, which asks
// both at once.
func (c *Chain) logs(ctx context.Context, f *evm.LogFilter, from, to uint64) (json.RawMessage, error) {
	where, args, err := logsWhere(f, c.id, from, to)
	if err != nil {
		return nil, err
	}
	rows, err := c.p.pool.Query(ctx, `SELECT `+logCols+`, b.hash, b.time
		FROM logs l JOIN blocks b ON b.chain_id = l.chain_id AND b.number = l.block_number
		WHERE `+coveredGuard+` AND `+where+` ORDER BY l.block_number, l.log_index`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []byte{'['}
	var l logScan
	dst := append(l.dest(), &l.blockHash, &l.time)
	for rows.Next() {
		l.topics = [maxTopics][]byte{}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		if out, err = l.appendTo(out); err != nil {
			return nil, err
		}
		if len(out) > maxAnswerBytes {
			return nil, ErrTooLarge
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) > 1 {
		return append(out, ']'), nil
	}
	var empty bool
	if err := c.p.pool.QueryRow(ctx, `SELECT `+coveredGuard+` AND NOT EXISTS (SELECT 1 FROM logs l WHERE `+where+`)`,
		args...).Scan(&empty); err != nil {
		return nil, err
	}
	if !empty {
		return nil, ErrNotCovered
	}
	return resultEmptyList, nil
}

// logsWhere is the condition on logs l of f in [from, to] of chain, with
// its arguments: $1 the chain, $2 and $3 the range.
func logsWhere(f *evm.LogFilter, chain int64, from, to uint64) (string, []any, error) {
	q := `l.chain_id = $1 AND l.block_number BETWEEN $2 AND $3`
	args := []any{chain, int64(from), int64(to)}
	if !f.Address.Any() {
		vals, err := values(&f.Address)
		if err != nil {
			return "", nil, err
		}
		args = append(args, vals)
		q += fmt.Sprintf(" AND l.address = ANY($%d)", len(args))
	}
	for i := range f.NTopics {
		c := &f.Topics[i]
		if c.Any() {
			continue
		}
		vals, err := values(c)
		if err != nil {
			return "", nil, err
		}
		args = append(args, vals)
		q += fmt.Sprintf(" AND l.topic%d = ANY($%d)", i, len(args))
	}
	if n := f.NTopics; n > 0 && f.Topics[n-1].Any() {
		q += fmt.Sprintf(" AND l.topic%d IS NOT NULL", n-1)
	}
	return q, args, nil
}

// values decodes a criterion's hex values.
func values(c *evm.Criterion) ([][]byte, error) {
	var out [][]byte
	for v := range c.Values() {
		b, err := hex.DecodeString(string(v[2:]))
		if err != nil {
			return nil, fmt.Errorf("%w: filter value %.80q", errMalformed, v)
		}
		out = append(out, b)
	}
	return out, nil
}
