package blockstore

import (
	"fmt"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
)

// blockRows is one block as it is stored: a row of blocks, one of
// transactions per transaction (with its receipt) and one of logs per log.
type blockRows struct {
	number       uint64
	hash, parent []byte
	time         uint64
	shell        []byte
	full         []byte // nil unless shell holds the hash-only form
	txs          []txRow
	logs         []logRow
}

type txRow struct {
	hash        []byte
	tx, receipt []byte
}

type logRow struct {
	txIndex int
	address []byte
	topics  [maxTopics][]byte // nil past the log's topics
	log     []byte
}

// blockDict is the dict every object of a block shares.
func blockDict(hash []byte, number, time uint64, parent []byte) dict {
	var d dict
	d[slotBlockHash] = quoteHex(nil, hash)
	d[slotNumber] = quoteQuantity(nil, number)
	d[slotTime] = quoteQuantity(nil, time)
	if parent != nil {
		d[slotParent] = quoteHex(nil, parent)
	}
	return d
}

// encode splits a block into its rows.
func encode(b *evm.Block) (*blockRows, error) {
	p, err := evm.Split(b)
	if err != nil {
		return nil, err
	}
	r := &blockRows{number: p.Number, time: p.Time}
	if r.hash, err = unhex(p.Hash, 32); err != nil {
		return nil, fmt.Errorf("block hash: %w", err)
	}
	if r.parent, err = unhex(p.Parent, 32); err != nil {
		return nil, fmt.Errorf("parent hash: %w", err)
	}
	d := blockDict(r.hash, r.number, r.time, r.parent)

	start, end, ok := span(p.Raw, "transactions")
	if ok && isJoin(p.Raw[start:end], p.Txs) {
		r.shell, err = squeeze(nil, splice(nil, p.Raw, start, end, nil), &d)
	} else {
		// Not compact JSON: keep both forms whole.
		if r.shell, err = squeeze(nil, p.HashOnly, &d); err == nil {
			r.full, err = squeeze(nil, p.Raw, &d)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("block: %w", err)
	}
	d[slotParent] = nil // only the block holds its parent's hash

	r.txs = make([]txRow, len(p.Txs))
	r.logs = make([]logRow, 0, len(p.Logs))
	for i := range p.Txs {
		t := &r.txs[i]
		if t.hash, err = unhex(p.TxHashes[i], 32); err != nil {
			return nil, fmt.Errorf("transaction %d hash: %w", i, err)
		}
		d[slotTxHash] = quote(p.TxHashes[i])
		if t.tx, err = squeeze(nil, p.Txs[i], &d); err != nil {
			return nil, fmt.Errorf("transaction %d: %w", i, err)
		}
		rc := p.Receipts[i]
		start, end, ok := span(rc, "logs")
		if !ok {
			return nil, fmt.Errorf("receipt %d: no logs", i)
		}
		logs := p.Logs[len(r.logs):]
		n := count(rc[start:end])
		if n > len(logs) {
			return nil, fmt.Errorf("receipt %d: logs do not match the block's", i)
		}
		raws := make([][]byte, n)
		for k := range raws {
			raws[k] = logs[k].Raw
		}
		if isJoin(rc[start:end], raws) {
			t.receipt, err = squeeze(nil, splice(nil, rc, start, end, nil), &d)
		} else {
			t.receipt, err = squeeze(nil, rc, &d)
		}
		if err != nil {
			return nil, fmt.Errorf("receipt %d: %w", i, err)
		}
		for k := range n {
			l, err := encodeLog(&logs[k], i, d)
			if err != nil {
				return nil, fmt.Errorf("receipt %d log %d: %w", i, k, err)
			}
			r.logs = append(r.logs, l)
		}
	}
	if len(r.logs) != len(p.Logs) {
		return nil, fmt.Errorf("%d logs in receipts, %d in the block", len(r.logs), len(p.Logs))
	}
	return r, nil
}

func encodeLog(l *evm.Log, txIndex int, d dict) (logRow, error) {
	r := logRow{txIndex: txIndex}
	var err error
	if r.address, err = unhex(l.Address, 20); err != nil {
		return r, fmt.Errorf("address: %w", err)
	}
	d[slotAddress] = quote(l.Address)
	if len(l.Topics) > maxTopics {
		return r, fmt.Errorf("%d topics", len(l.Topics))
	}
	for i, t := range l.Topics {
		if r.topics[i], err = unhex(t, 32); err != nil {
			return r, fmt.Errorf("topic %d: %w", i, err)
		}
		d[slotTopic0+i] = quote(t)
	}
	if r.log, err = squeeze(nil, l.Raw, &d); err != nil {
		return r, err
	}
	return r, nil
}

// count returns how many elements the JSON array arr has.
func count(arr []byte) int {
	if len(arr) == 0 || arr[0] != '[' {
		return 0
	}
	it := jsonscan.Array{Data: arr, I: 1}
	n := 0
	for {
		if _, ok := it.Next(); !ok {
			return n
		}
		n++
	}
}
