package evm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/venn-gateway/venn/jsonscan"
)

// Block is one block as the stalker fetched it: the block with full
// transaction objects (eth_getBlockByNumber(n, true)) and its receipts
// (eth_getBlockReceipts), both exactly as a remote sent them. Number, Hash
// and Parent are read from Raw by ParseBlock; Hash and Parent are lowercase
// 0x-prefixed hex.
type Block struct {
	Number   uint64          `json:"number"`
	Hash     string          `json:"hash"`
	Parent   string          `json:"parent"`
	Raw      json.RawMessage `json:"block"`
	Receipts json.RawMessage `json:"receipts"`
}

// Parts is a block split into what is served separately: the block in
// both of geth's forms, and each transaction, receipt and log, every one a
// sub-slice of the bytes the remote sent. The history store files blocks
// by these parts; subscribers get the logs.
type Parts struct {
	*Block
	Time     uint64   // the block's timestamp
	HashOnly []byte   // Raw with transactions as hashes (eth_getBlockBy*(…, false))
	Txs      [][]byte // transaction objects, by index
	TxHashes []string // lowercase, by index
	Receipts [][]byte // receipt objects, by index
	Logs     []Log    // every log of the block, in log index order
}

// Split checks b the way ParseBlock does and splits it into its parts.
func Split(b *Block) (*Parts, error) {
	e, err := indexBlock(b)
	if err != nil {
		return nil, err
	}
	if err := e.indexReceipts(); err != nil {
		return nil, fmt.Errorf("block %d %s: %w", b.Number, b.Hash, err)
	}
	return e, nil
}

// Log is one log of a block, as eth_getLogs returns it.
type Log struct {
	Raw     []byte   // the log object, as the remote sent it in its receipt
	Address string   // lowercase
	Topics  []string // lowercase
}

var errNotBlock = errors.New("not a block")

// ParseBlock checks that raw is a block with full transaction objects and
// that receipts belong to it (one per transaction, in order, naming the
// block's hash), and returns the Block. A remote that answers with a
// different block's receipts (it reorged or lags between the two calls)
// fails here and the stalker asks again.
func ParseBlock(raw, receipts []byte) (*Block, error) {
	p, err := Split(&Block{Raw: raw, Receipts: receipts})
	if err != nil {
		return nil, err
	}
	return p.Block, nil
}

// TxHashes reads a block's number, hash and parent and its transactions'
// hashes, without receipts: what the stalker needs to fetch them.
func TxHashes(raw []byte) (*Block, []string, error) {
	e, err := indexBlock(&Block{Raw: raw})
	if err != nil {
		return nil, nil, err
	}
	return e.Block, e.TxHashes, nil
}

// indexBlock parses the block itself, into a copy of b: a published
// *Block may be shared by the store and every window of the process.
func indexBlock(shared *Block) (*Parts, error) {
	b := &Block{Raw: shared.Raw, Receipts: shared.Receipts}
	e := &Parts{Block: b}
	raw := b.Raw
	i := jsonscan.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, errNotBlock
	}
	var txStart, txEnd int
	var haveNumber bool
	obj := jsonscan.Object{Data: raw, I: i + 1}
	for {
		k, v, ok := obj.Next()
		if !ok {
			break
		}
		switch string(k) {
		case "number":
			n, err := quantity(v)
			if err != nil {
				return nil, fmt.Errorf("block number: %w", err)
			}
			b.Number, haveNumber = n, true
		case "timestamp":
			e.Time, _ = quantity(v)
		case "hash":
			b.Hash = hash(v)
		case "parentHash":
			b.Parent = hash(v)
		case "transactions":
			txEnd = obj.I
			txStart = txEnd - len(v)
		}
	}
	if !haveNumber || len(b.Hash) != 66 || len(b.Parent) != 66 || txEnd == 0 {
		return nil, fmt.Errorf("%w: number, hash, parentHash or transactions missing", errNotBlock)
	}
	txs := jsonscan.Array{Data: raw, I: txStart + 1}
	if raw[txStart] != '[' {
		return nil, fmt.Errorf("%w: transactions is not an array", errNotBlock)
	}
	hashOnly := make([]byte, 0, txStart+len(raw)-txEnd+2)
	hashOnly = append(hashOnly, raw[:txStart]...)
	hashOnly = append(hashOnly, '[')
	for {
		tx, ok := txs.Next()
		if !ok {
			break
		}
		h := field(tx, "hash")
		if len(h) != 66 {
			return nil, fmt.Errorf("block %d: transaction %d has no hash (fetch full transactions)", b.Number, len(e.Txs))
		}
		if len(e.Txs) > 0 {
			hashOnly = append(hashOnly, ',')
		}
		hashOnly = append(hashOnly, '"')
		hashOnly = append(hashOnly, h...)
		hashOnly = append(hashOnly, '"')
		e.Txs = append(e.Txs, tx)
		e.TxHashes = append(e.TxHashes, h)
	}
	hashOnly = append(hashOnly, ']')
	e.HashOnly = append(hashOnly, raw[txEnd:]...)
	return e, nil
}

func (e *Parts) indexReceipts() error {
	r := e.Block.Receipts
	i := jsonscan.SkipSpace(r, 0)
	if i >= len(r) || r[i] != '[' {
		return errors.New("receipts are not an array")
	}
	rs := jsonscan.Array{Data: r, I: i + 1}
	for {
		rc, ok := rs.Next()
		if !ok {
			break
		}
		n := len(e.Receipts)
		if n >= len(e.TxHashes) {
			return errors.New("more receipts than transactions")
		}
		if got := field(rc, "transactionHash"); got != e.TxHashes[n] {
			return fmt.Errorf("receipt %d is for transaction %s, want %s", n, got, e.TxHashes[n])
		}
		if got := field(rc, "blockHash"); got != e.Hash {
			return fmt.Errorf("receipt %d is for block %s", n, got)
		}
		e.Receipts = append(e.Receipts, rc)
		if err := e.indexLogs(rc); err != nil {
			return fmt.Errorf("receipt %d: %w", n, err)
		}
	}
	if len(e.Receipts) != len(e.TxHashes) {
		return fmt.Errorf("%d receipts for %d transactions", len(e.Receipts), len(e.TxHashes))
	}
	return nil
}

func (e *Parts) indexLogs(receipt []byte) error {
	logs := jsonscan.Member(receipt, "logs")
	if len(logs) == 0 || logs[0] != '[' {
		return errors.New("logs missing")
	}
	it := jsonscan.Array{Data: logs, I: 1}
	for {
		l, ok := it.Next()
		if !ok {
			return nil
		}
		le := Log{Raw: l, Address: strings.ToLower(field(l, "address"))}
		if ts := jsonscan.Member(l, "topics"); len(ts) > 0 && ts[0] == '[' {
			tit := jsonscan.Array{Data: ts, I: 1}
			for {
				t, ok := tit.Next()
				if !ok {
					break
				}
				le.Topics = append(le.Topics, hash(t))
			}
		}
		e.Logs = append(e.Logs, le)
	}
}

// field returns a string member's value, lowercased, without quotes.
func field(obj []byte, key string) string { return hash(jsonscan.Member(obj, key)) }

// hash unquotes a JSON string of hex and lowercases it.
func hash(v []byte) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return ""
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		return ""
	}
	return strings.ToLower(string(s))
}

func quantity(v []byte) (uint64, error) {
	s, err := strconv.Unquote(string(v))
	if err != nil {
		return 0, err
	}
	return ParseQuantity(s)
}
