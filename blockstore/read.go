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
	"github.com/venn-gateway/venn/jsonscan"
)

// Fixed answers, never written to by callers.
var (
	resultNull      = json.RawMessage("null")
	resultEmptyList = json.RawMessage("[]")
)

// Answer answers a call from stored data exactly as geth does. ok is false
// when the store cannot (a block or transaction it does not hold, a range
// not wholly covered, tags like latest, a call not read Exact); err is set
// when Postgres failed. Methods: eth_getBlockByNumber/ByHash,
// eth_getBlockReceipts, eth_getTransactionByHash, eth_getTransactionReceipt,
// eth_getTransactionByBlock{Hash,Number}AndIndex,
// eth_getBlockTransactionCountBy{Hash,Number},
// eth_getUncleCountByBlock{Hash,Number}, and eth_getLogs over a range of
// explicit numbers wholly covered or by a stored blockHash. call is taken
// by value so that a caller behind an interface does not move it to the
// heap.
func (c *Chain) Answer(ctx context.Context, call evm.Call) (json.RawMessage, bool, error) {
	if !answerable(&call) {
		return nil, false, nil
	}
	var res json.RawMessage
	ok := false
	err := c.do(ctx, opAnswer, true, func(ctx context.Context) error {
		var err error
		res, ok, err = c.answer(ctx, &call)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, false, nil // the remotes split it
		}
		return nil, false, err
	}
	return res, ok, nil
}

func (c *Chain) answer(ctx context.Context, r *evm.Call) (json.RawMessage, bool, error) {
	switch r.Kind {
	case evm.KindBlock:
		return c.answerBlock(ctx, r)
	case evm.KindBlockReceipts:
		return c.answerReceipts(ctx, r)
	case evm.KindTx, evm.KindReceipt:
		return c.answerTx(ctx, r)
	case evm.KindTxByIndex:
		return c.answerTxByIndex(ctx, r)
	case evm.KindTxCount, evm.KindUncleCount:
		return c.answerCount(ctx, r)
	case evm.KindLogs:
		return c.answerLogs(ctx, r)
	}
	return nil, false, nil
}

// Conditions selecting a request's block: in blocks b, and in a table
// keyed by block_number. $1 is the chain, $2 the number or hash.
const (
	blockByNumber = `b.number = $2`
	blockByHash   = `b.hash = $2`
	childByNumber = `block_number = $2`
	childByHash   = `block_number = (SELECT number FROM blocks WHERE chain_id = $1 AND hash = $2)`
)

// blockSel returns the request's block conditions and the value of $2.
func blockSel(r *evm.Call) (inBlocks, inChild string, arg any) {
	if r.ByHash() {
		h, _ := hex.DecodeString(string(r.Key[2:])) // checked by evm.ArgHash
		return blockByHash, childByHash, h
	}
	return blockByNumber, childByNumber, int64(min(r.Ref.Number, math.MaxInt64))
}

// blockRow is a row of blocks.
type blockRow struct {
	number       int64
	hash, parent []byte
	time         int64
	shell, full  []byte
}

const blockCols = `b.number, b.hash, b.parent, b.time, b.shell, b.full_json`

func (b *blockRow) scan(row pgx.Row) error {
	return row.Scan(&b.number, &b.hash, &b.parent, &b.time, &b.shell, &b.full)
}

func (b *blockRow) dict() dict {
	return blockDict(b.hash, uint64(b.number), uint64(b.time), b.parent)
}

// hashOnly returns the block as eth_getBlockBy*(…, false) does.
func (b *blockRow) hashOnly(txHashes [][]byte) ([]byte, error) {
	d := b.dict()
	if b.full != nil {
		return expand(nil, b.shell, &d)
	}
	quoted := make([][]byte, len(txHashes))
	for i, h := range txHashes {
		quoted[i] = quoteHex(nil, h)
	}
	return b.fill(&d, quoted)
}

// fill returns the block with its transactions array made of txs.
func (b *blockRow) fill(d *dict, txs [][]byte) ([]byte, error) {
	shell, err := expand(nil, b.shell, d)
	if err != nil {
		return nil, err
	}
	start, end, ok := span(shell, "transactions")
	if !ok {
		return nil, fmt.Errorf("%w: block %d has no transactions", errMalformed, b.number)
	}
	n := len(shell)
	for _, t := range txs {
		n += len(t) + 1
	}
	return splice(make([]byte, 0, n), shell, start, end, txs), nil
}

func (c *Chain) answerBlock(ctx context.Context, r *evm.Call) (json.RawMessage, bool, error) {
	inBlocks, inChild, arg := blockSel(r)
	cols := `hash`
	if r.Full {
		cols = `hash, tx`
	}
	var batch pgx.Batch
	var b blockRow
	found := false
	batch.Queue(`SELECT `+blockCols+` FROM blocks b WHERE b.chain_id = $1 AND `+inBlocks, c.id, arg).
		QueryRow(func(row pgx.Row) error {
			err := b.scan(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
	var hashes, txs [][]byte
	batch.Queue(`SELECT `+cols+` FROM transactions WHERE chain_id = $1 AND `+inChild+` ORDER BY idx`, c.id, arg).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var h, tx []byte
				dst := []any{&h}
				if r.Full {
					dst = append(dst, &tx)
				}
				if err := rows.Scan(dst...); err != nil {
					return err
				}
				hashes, txs = append(hashes, h), append(txs, tx)
			}
			return rows.Err()
		})
	if err := c.p.pool.SendBatch(ctx, &batch).Close(); err != nil {
		return nil, false, err
	}
	if !found {
		return nil, false, nil
	}
	if !r.Full {
		res, err := b.hashOnly(hashes)
		return res, err == nil, err
	}
	d := b.dict()
	if b.full != nil {
		res, err := expand(nil, b.full, &d)
		return res, err == nil, err
	}
	d[slotParent] = nil
	for i := range txs {
		d[slotTxHash] = quoteHex(nil, hashes[i])
		var err error
		if txs[i], err = expand(nil, txs[i], &d); err != nil {
			return nil, false, err
		}
	}
	d[slotParent] = quoteHex(nil, b.parent)
	res, err := b.fill(&d, txs)
	return res, err == nil, err
}

// logScan is a row of logs with what its dict needs of its block.
type logScan struct {
	number    int64
	txIndex   int32
	txHash    []byte
	address   []byte
	topics    [maxTopics][]byte
	log       []byte
	blockHash []byte
	time      int64
}

const logCols = `l.block_number, l.tx_index, l.tx_hash, l.address, l.topic0, l.topic1, l.topic2, l.topic3, l.log`

func (l *logScan) dest() []any {
	return []any{&l.number, &l.txIndex, &l.txHash, &l.address, &l.topics[0], &l.topics[1], &l.topics[2], &l.topics[3], &l.log}
}

// collectLogs is a batch query's callback that scans its rows, of
// logCols, into logs.
func collectLogs(logs *[]logScan) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			var l logScan
			if err := rows.Scan(l.dest()...); err != nil {
				return err
			}
			*logs = append(*logs, l)
		}
		return rows.Err()
	}
}

// appendTo appends the log's JSON, as the node sent it, to dst.
func (l *logScan) appendTo(dst []byte) ([]byte, error) {
	// The dict's values go in one buffer on the stack: this runs once per
	// log of an answer. Were it too small, append would move on to the
	// heap, leaving the values already set intact.
	var buf [3*(2+evm.HashLen) + 2*22 + (2 + evm.AddressLen) + maxTopics*(2+evm.HashLen)]byte
	b := buf[:0]
	var d dict
	set := func(s, start int) { d[s] = b[start:len(b):len(b)] }
	n := len(b)
	b = quoteHex(b, l.blockHash)
	set(slotBlockHash, n)
	n = len(b)
	b = quoteQuantity(b, uint64(l.number))
	set(slotNumber, n)
	n = len(b)
	b = quoteQuantity(b, uint64(l.time))
	set(slotTime, n)
	n = len(b)
	b = quoteHex(b, l.txHash)
	set(slotTxHash, n)
	n = len(b)
	b = quoteHex(b, l.address)
	set(slotAddress, n)
	for i, t := range l.topics {
		if t != nil {
			n = len(b)
			b = quoteHex(b, t)
			set(slotTopic0+i, n)
		}
	}
	return expand(dst, l.log, &d)
}

// receipt returns a stored receipt, its logs spliced back in.
func receipt(stored []byte, d *dict, logs []logScan) ([]byte, error) {
	rc, err := expand(nil, stored, d)
	if err != nil {
		return nil, err
	}
	start, end, ok := span(rc, "logs")
	if !ok {
		return nil, fmt.Errorf("%w: receipt without logs", errMalformed)
	}
	if end-start != 2 || len(logs) == 0 {
		return rc, nil // stored whole, or no logs
	}
	parts := make([][]byte, len(logs))
	for i := range logs {
		if parts[i], err = logs[i].appendTo(nil); err != nil {
			return nil, err
		}
	}
	return splice(nil, rc, start, end, parts), nil
}

func (c *Chain) answerReceipts(ctx context.Context, r *evm.Call) (json.RawMessage, bool, error) {
	inBlocks, inChild, arg := blockSel(r)
	var batch pgx.Batch
	var number, time int64
	var hash []byte
	found := false
	batch.Queue(`SELECT b.number, b.hash, b.time FROM blocks b WHERE b.chain_id = $1 AND `+inBlocks, c.id, arg).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&number, &hash, &time)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
	type txr struct{ hash, receipt []byte }
	var txs []txr
	batch.Queue(`SELECT hash, receipt FROM transactions WHERE chain_id = $1 AND `+inChild+` ORDER BY idx`, c.id, arg).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var t txr
				if err := rows.Scan(&t.hash, &t.receipt); err != nil {
					return err
				}
				txs = append(txs, t)
			}
			return rows.Err()
		})
	var logs []logScan
	batch.Queue(`SELECT `+logCols+` FROM logs l WHERE chain_id = $1 AND `+inChild+` ORDER BY log_index`, c.id, arg).
		Query(collectLogs(&logs))
	if err := c.p.pool.SendBatch(ctx, &batch).Close(); err != nil {
		return nil, false, err
	}
	if !found {
		return nil, false, nil
	}
	d := blockDict(hash, uint64(number), uint64(time), nil)
	parts := make([]json.RawMessage, len(txs))
	for i, t := range txs {
		d[slotTxHash] = quoteHex(nil, t.hash)
		var mine []logScan
		for len(logs) > 0 && int(logs[0].txIndex) == i {
			logs[0].blockHash, logs[0].time = hash, time
			mine, logs = append(mine, logs[0]), logs[1:]
		}
		rc, err := receipt(t.receipt, &d, mine)
		if err != nil {
			return nil, false, err
		}
		parts[i] = rc
	}
	if len(logs) > 0 {
		return nil, false, fmt.Errorf("%w: block %d has logs of no transaction", errMalformed, number)
	}
	return jsonscan.JoinValues(parts), true, nil
}

// answerTx: eth_getTransactionByHash and eth_getTransactionReceipt.
func (c *Chain) answerTx(ctx context.Context, r *evm.Call) (json.RawMessage, bool, error) {
	h, _ := hex.DecodeString(string(r.Key[2:]))
	col := `t.tx`
	if r.Kind == evm.KindReceipt {
		col = `t.receipt`
	}
	var batch pgx.Batch
	type hit struct {
		stored, blockHash []byte
		number, time      int64
	}
	var hits []hit
	batch.Queue(`SELECT `+col+`, b.hash, b.number, b.time FROM transactions t
		JOIN blocks b ON b.chain_id = t.chain_id AND b.number = t.block_number
		WHERE t.chain_id = $1 AND t.hash = $2`, c.id, h).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var x hit
				if err := rows.Scan(&x.stored, &x.blockHash, &x.number, &x.time); err != nil {
					return err
				}
				hits = append(hits, x)
			}
			return rows.Err()
		})
	var logs []logScan
	if r.Kind == evm.KindReceipt {
		batch.Queue(`SELECT `+logCols+` FROM logs l
			JOIN transactions t ON t.chain_id = l.chain_id AND t.block_number = l.block_number AND t.idx = l.tx_index
			WHERE t.chain_id = $1 AND t.hash = $2 ORDER BY l.block_number, l.log_index`, c.id, h).
			Query(collectLogs(&logs))
	}
	if err := c.p.pool.SendBatch(ctx, &batch).Close(); err != nil {
		return nil, false, err
	}
	if len(hits) != 1 {
		return nil, false, nil // unknown here, or (never on one chain) in two blocks
	}
	x := hits[0]
	d := blockDict(x.blockHash, uint64(x.number), uint64(x.time), nil)
	d[slotTxHash] = quoteHex(nil, h)
	if r.Kind == evm.KindTx {
		res, err := expand(nil, x.stored, &d)
		return res, err == nil, err
	}
	for i := range logs {
		logs[i].blockHash, logs[i].time = x.blockHash, x.time
	}
	rc, err := receipt(x.stored, &d, logs)
	return rc, err == nil, err
}

func (c *Chain) answerTxByIndex(ctx context.Context, r *evm.Call) (json.RawMessage, bool, error) {
	inBlocks, _, arg := blockSel(r)
	idx := int64(-1) // past every block's transactions
	if r.Index <= math.MaxInt32 {
		idx = int64(r.Index)
	}
	var number, time int64
	var hash, txHash, tx []byte
	err := c.p.pool.QueryRow(ctx, `SELECT b.number, b.hash, b.time, t.hash, t.tx FROM blocks b
		LEFT JOIN transactions t ON t.chain_id = b.chain_id AND t.block_number = b.number AND t.idx = $3
		WHERE b.chain_id = $1 AND `+inBlocks, c.id, arg, idx).Scan(&number, &hash, &time, &txHash, &tx)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case tx == nil:
		return resultNull, true, nil // geth: null past the last transaction
	}
	d := blockDict(hash, uint64(number), uint64(time), nil)
	d[slotTxHash] = quoteHex(nil, txHash)
	res, err := expand(nil, tx, &d)
	return res, err == nil, err
}

// answerCount: eth_getBlockTransactionCountBy* and eth_getUncleCountBy*.
func (c *Chain) answerCount(ctx context.Context, r *evm.Call) (json.RawMessage, bool, error) {
	inBlocks, _, arg := blockSel(r)
	var b blockRow
	var n int64
	err := c.p.pool.QueryRow(ctx, `SELECT `+blockCols+`,
		(SELECT count(*) FROM transactions t WHERE t.chain_id = b.chain_id AND t.block_number = b.number)
		FROM blocks b WHERE b.chain_id = $1 AND `+inBlocks, c.id, arg).
		Scan(&b.number, &b.hash, &b.parent, &b.time, &b.shell, &b.full, &n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	if r.Kind == evm.KindUncleCount {
		d := b.dict()
		shell, err := expand(nil, b.shell, &d)
		if err != nil {
			return nil, false, err
		}
		u := jsonscan.Member(shell, "uncles")
		if len(u) == 0 || u[0] != '[' {
			return nil, false, nil // geth would answer 0x0; rare, so left to it
		}
		n = int64(count(u))
	}
	return quoteQuantity(nil, uint64(n)), true, nil
}

// Covered returns the stored sub-ranges of [from, to], ascending.
func (c *Chain) Covered(ctx context.Context, from, to uint64) ([]Range, error) {
	if from > to || from > math.MaxInt64 {
		return nil, nil
	}
	to = min(to, math.MaxInt64)
	var out []Range
	err := c.do(ctx, opCovered, true, func(ctx context.Context) error {
		out = out[:0]
		rows, err := c.p.pool.Query(ctx, `SELECT GREATEST(from_block, $2), LEAST(to_block, $3) FROM coverage
			WHERE chain_id = $1 AND from_block <= $3 AND to_block >= $2 ORDER BY from_block`, c.id, int64(from), int64(to))
		if err != nil {
			return err
		}
		var a, b int64
		_, err = pgx.ForEachRow(rows, []any{&a, &b}, func() error {
			out = append(out, Range{From: uint64(a), To: uint64(b)})
			return nil
		})
		return err
	})
	return out, err
}

// Highest returns the highest stored block number; ok is false when the
// chain has none.
func (c *Chain) Highest(ctx context.Context) (n uint64, ok bool, err error) {
	err = c.do(ctx, opHighest, true, func(ctx context.Context) error {
		var h *int64
		if err := c.p.pool.QueryRow(ctx, `SELECT max(number) FROM blocks WHERE chain_id = $1`, c.id).Scan(&h); err != nil {
			return err
		}
		if h != nil {
			n, ok = uint64(*h), true
		}
		return nil
	})
	return n, ok, err
}
