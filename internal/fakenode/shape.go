package fakenode

// A chain of real-sized blocks released on a schedule (ShapeChain): what
// a head feed meets on a live network, where the synthetic chain's blocks
// are a few hundred bytes and move only when a test says.

import (
	"context"
	"crypto/ecdsa"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/trie"

	"github.com/venn-gateway/venn/jrpc"
)

// Shape is a chain's pace and block size.
type Shape struct {
	Name      string
	BlockTime time.Duration
	// Txs is how many transactions each block holds.
	Txs int
	// Jitter: each block is released up to this long after its slot
	// (uniform), as blocks reach a provider's node a little late and not
	// always by the same amount.
	Jitter time.Duration
}

// Shapes are the chains the shape bench measures: an L2 sequencer, a
// Base-like and a BSC-like chain, and Ethereum mainnet. Each transaction
// carries 260 bytes of calldata and emits two logs, which makes a block
// and its receipts about 1.1 KB and 2.3 KB per transaction in JSON, as on
// those chains.
var Shapes = []Shape{
	{Name: "l2", BlockTime: 250 * time.Millisecond, Txs: 60, Jitter: 20 * time.Millisecond},
	{Name: "base", BlockTime: 2 * time.Second, Txs: 200, Jitter: 100 * time.Millisecond},
	{Name: "bsc", BlockTime: 750 * time.Millisecond, Txs: 150, Jitter: 50 * time.Millisecond},
	{Name: "mainnet", BlockTime: 12 * time.Second, Txs: 200, Jitter: time.Second},
}

// ShapeByName returns the shape of Shapes called name.
func ShapeByName(name string) (Shape, bool) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, true
		}
	}
	return Shape{}, false
}

// Shape chain settings.
const (
	// shapeHistory is how many blocks the chain has when it starts: a
	// few more than a bench's head window. They are a tenth of the
	// shape's size.
	shapeHistory = 72
	// shapeKeep is how many blocks below the head are still served.
	shapeKeep = 160
	// ShapeReleases is how many blocks' release times are kept.
	ShapeReleases = 8192
	// shapeSenders sign the transactions, round robin.
	shapeSenders   = 16
	shapeCalldata  = 180
	shapeLogsPerTx = 2
	shapeGasPerTx  = 90_000
	shapeGasLimit  = 60_000_000
	shapeFinalized = 64
	shapeSafe      = 32
)

// ShapeChain is a chain of real blocks, go-ethereum's types throughout:
// signed type-2 transactions, receipts with logs, and the transactions
// root, receipts root, logs bloom and block hash computed as a node
// computes them, so venn's integrity checks pass on it. It releases one
// block per BlockTime (plus jitter) on a wall-clock schedule whose
// timestamps are the slots' seconds, and serves through a Node: it takes
// over eth_blockNumber, eth_getBlockByNumber, eth_getBlockByHash and
// eth_getBlockReceipts with a hook, and pushes each released block's
// header to the node's newHeads subscribers. Everything else is the
// node's synthetic chain's.
//
// Blocks are encoded once, when built (half a block time before their
// slot, when the last block's fetches are done), so serving one is a
// copy.
type ShapeChain struct {
	node    *Node
	shape   Shape
	chainID *big.Int
	signer  types.Signer
	keys    [shapeSenders]*ecdsa.PrivateKey
	from    [shapeSenders]common.Address
	start   time.Time // block first+1's slot
	first   uint64    // the head at start

	head atomic.Pointer[shapeBlock]

	mu       sync.RWMutex
	byNum    map[uint64]*shapeBlock // built blocks, released or not
	byHash   map[common.Hash]*shapeBlock
	released map[uint64]int64 // unix nanos of each release kept
	nonces   [shapeSenders]uint64
}

// shapeBlock is one built block, encoded as geth answers for it.
type shapeBlock struct {
	num      uint64
	hash     common.Hash
	full     []byte // eth_getBlockBy*(…, true)
	hashes   []byte // eth_getBlockBy*(…, false)
	header   []byte // a newHeads notification's result
	receipts []byte // eth_getBlockReceipts
}

// NewShapeChain builds shape's chain on node (whose ChainID it takes),
// shapeHistory blocks long, and takes over node's block methods. Run
// releases the blocks that follow.
func NewShapeChain(node *Node, shape Shape) (*ShapeChain, error) {
	if shape.BlockTime <= 0 || shape.Txs < 0 {
		return nil, fmt.Errorf("shape %q: block time %v and %d transactions", shape.Name, shape.BlockTime, shape.Txs)
	}
	c := &ShapeChain{
		node:     node,
		shape:    shape,
		chainID:  new(big.Int).SetUint64(node.opts.ChainID),
		byNum:    map[uint64]*shapeBlock{},
		byHash:   map[common.Hash]*shapeBlock{},
		released: map[uint64]int64{},
		first:    shapeHistory,
	}
	c.signer = types.LatestSignerForChainID(c.chainID)
	for i := range c.keys {
		var seed [32]byte
		binary.BigEndian.PutUint64(seed[24:], uint64(i)+1)
		key, err := crypto.ToECDSA(crypto.Keccak256(seed[:], []byte("fakenode shape")))
		if err != nil {
			return nil, err
		}
		c.keys[i], c.from[i] = key, crypto.PubkeyToAddress(key.PublicKey)
	}
	// The first slot is the next whole second after the history is built,
	// so timestamps fall on slot boundaries as a sequencer's do.
	now := time.Now()
	c.start = now.Truncate(time.Second).Add(time.Second)
	var parent common.Hash
	for n := uint64(0); n <= c.first; n++ {
		b, err := c.build(n, parent)
		if err != nil {
			return nil, err
		}
		parent = b.hash
		c.store(b)
		c.head.Store(b)
	}
	node.SetHook(c.hook)
	return c, nil
}

// Shape is the chain's shape.
func (c *ShapeChain) Shape() Shape { return c.shape }

// Head is the number of the last block released.
func (c *ShapeChain) Head() uint64 { return c.head.Load().num }

// slot is block n's scheduled time (n above the history).
func (c *ShapeChain) slot(n uint64) time.Time {
	return c.start.Add(time.Duration(int64(n)-int64(c.first)-1) * c.shape.BlockTime)
}

// Released reports when block n was released (zero for a block of the
// history, or not yet released, or released too long ago).
func (c *ShapeChain) Released(n uint64) time.Time {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if at, ok := c.released[n]; ok {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// Run releases a block at each slot until ctx ends. Each block is built
// half a block time before its slot.
func (c *ShapeChain) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	wait := func(at time.Time) bool {
		timer.Reset(time.Until(at))
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	for {
		head := c.head.Load()
		n := head.num + 1
		slot := c.slot(n)
		if !wait(slot.Add(-c.shape.BlockTime / 2)) {
			return ctx.Err()
		}
		b, err := c.build(n, head.hash)
		if err != nil {
			return err
		}
		c.store(b)
		at := slot
		if c.shape.Jitter > 0 {
			at = at.Add(rand.N(c.shape.Jitter))
		}
		if !wait(at) {
			return ctx.Err()
		}
		c.release(b)
	}
}

// release makes b the head and tells the newHeads subscribers.
func (c *ShapeChain) release(b *shapeBlock) {
	now := time.Now()
	c.mu.Lock()
	c.released[b.num] = now.UnixNano()
	delete(c.released, b.num-min(b.num, ShapeReleases))
	c.mu.Unlock()
	c.head.Store(b)
	c.node.PushHead(b.header)
}

// store keeps b and forgets the block shapeKeep below it.
func (c *ShapeChain) store(b *shapeBlock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byNum[b.num] = b
	c.byHash[b.hash] = b
	if b.num >= shapeKeep {
		if old := c.byNum[b.num-shapeKeep]; old != nil {
			delete(c.byNum, old.num)
			delete(c.byHash, old.hash)
		}
	}
}

// timeOf is block n's timestamp: its slot's second.
func (c *ShapeChain) timeOf(n uint64) uint64 {
	return uint64(c.slot(n).Unix())
}

// build makes block n on parent: signed transactions, their receipts and
// logs, the roots, and every encoding served.
func (c *ShapeChain) build(n uint64, parent common.Hash) (*shapeBlock, error) {
	txCount := c.shape.Txs
	switch {
	case n == 0:
		txCount = 0
	case n <= c.first:
		// The history is loaded, not timed: a tenth of the size, so a
		// node starts in moments on a busy machine.
		txCount = (txCount + 9) / 10
	}
	baseFee := big.NewInt(int64(1_000_000_000 + (n%97)*1_000_000))
	tip := big.NewInt(1_500_000_000)
	feeCap := new(big.Int).Add(new(big.Int).Mul(baseFee, big.NewInt(2)), tip)
	txs := make([]*types.Transaction, txCount)
	receipts := make([]*types.Receipt, txCount)
	senders := make([]common.Address, txCount)
	var cum uint64
	for i := range txCount {
		s := (int(n)*txCount + i) % shapeSenders
		c.mu.Lock()
		nonce := c.nonces[s]
		c.nonces[s]++
		c.mu.Unlock()
		to := contractOfShape(n, i)
		data := make([]byte, shapeCalldata)
		data[0], data[1], data[2], data[3] = 0xa9, 0x05, 0x9c, 0xbb // transfer(address,uint256)
		binary.BigEndian.PutUint64(data[28:], n)
		binary.BigEndian.PutUint64(data[60:], uint64(i))
		for j := 68; j < len(data); j += 8 {
			binary.BigEndian.PutUint64(data[j:], mix64(n<<20^uint64(i)<<8^uint64(j)))
		}
		tx, err := types.SignNewTx(c.keys[s], c.signer, &types.DynamicFeeTx{
			ChainID: c.chainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap,
			Gas: 2 * shapeGasPerTx, To: &to, Value: new(big.Int), Data: data,
		})
		if err != nil {
			return nil, fmt.Errorf("sign: %w", err)
		}
		txs[i], senders[i] = tx, c.from[s]
		cum += shapeGasPerTx
		r := &types.Receipt{Type: types.DynamicFeeTxType, Status: types.ReceiptStatusSuccessful, CumulativeGasUsed: cum}
		for k := range shapeLogsPerTx {
			var amount [64]byte
			binary.BigEndian.PutUint64(amount[24:], mix64(n^uint64(i)<<16^uint64(k)))
			binary.BigEndian.PutUint64(amount[56:], n)
			r.Logs = append(r.Logs, &types.Log{
				Address: to,
				Topics:  []common.Hash{shapeTopics[k%len(shapeTopics)], common.BytesToHash(c.from[s][:]), common.BytesToHash(to[:])},
				Data:    amount[:],
			})
		}
		r.Bloom = types.CreateBloom(r)
		receipts[i] = r
	}
	var beacon common.Hash
	binary.BigEndian.PutUint64(beacon[24:], mix64(n^0xbeac0))
	zero := uint64(0)
	h := &types.Header{
		ParentHash: parent, UncleHash: types.EmptyUncleHash, Coinbase: common.HexToAddress(minerAddress),
		Root: crypto.Keccak256Hash([]byte("state"), binary.BigEndian.AppendUint64(nil, n)), Difficulty: new(big.Int),
		Number: new(big.Int).SetUint64(n), GasLimit: shapeGasLimit, GasUsed: cum, Time: c.timeOf(n),
		BaseFee: baseFee, BlobGasUsed: &zero, ExcessBlobGas: &zero, ParentBeaconRoot: &beacon,
		RequestsHash: &types.EmptyRequestsHash,
	}
	blk := types.NewBlock(h, &types.Body{Transactions: txs, Withdrawals: []*types.Withdrawal{}}, receipts, trie.NewStackTrie(nil))
	return c.encode(blk, senders, receipts)
}

// shapeTopics are the events the shape chain's logs carry: Transfer and
// Approval.
var shapeTopics = []common.Hash{
	common.HexToHash("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"),
	common.HexToHash("0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925"),
}

// contractOfShape is the contract transaction i of block n calls: one of
// 64, so log filters select real subsets.
func contractOfShape(n uint64, i int) common.Address {
	var a common.Address
	a[0], a[1] = 0xc0, 0xde
	binary.BigEndian.PutUint64(a[12:], mix64(n*1000+uint64(i))%64)
	return a
}

// encode writes blk as geth's RPC does: the header as newHeads sends it,
// the block with full transactions and with their hashes, and its
// receipts as eth_getBlockReceipts.
func (c *ShapeChain) encode(blk *types.Block, senders []common.Address, receipts []*types.Receipt) (*shapeBlock, error) {
	hash := blk.Hash()
	h := blk.Header()
	header, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	// RPCMarshalBlock: the header's members (forks it lacks left out),
	// then size, transactions, uncles and withdrawals; keys sorted, as a
	// Go map marshals.
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(header, &fields); err != nil {
		return nil, err
	}
	for k, v := range fields {
		if string(v) == "null" {
			delete(fields, k)
		}
	}
	fields["size"] = json.RawMessage(strconv.Quote(hexutil.EncodeUint64(blk.Size())))
	fields["uncles"] = json.RawMessage(`[]`)
	fields["withdrawals"] = json.RawMessage(`[]`)
	num, ts := blk.NumberU64(), blk.Time()
	txs := blk.Transactions()
	full := make([]json.RawMessage, len(txs))
	hashes := make([]common.Hash, len(txs))
	var logIndex uint
	receiptJSON := make([]json.RawMessage, len(txs))
	for i, tx := range txs {
		hashes[i] = tx.Hash()
		raw, err := tx.MarshalJSON()
		if err != nil {
			return nil, err
		}
		m := map[string]json.RawMessage{}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		price := new(big.Int).Add(blk.BaseFee(), tx.GasTipCap())
		m["blockHash"] = quoted(hash.Hex())
		m["blockNumber"] = quoted(hexutil.EncodeUint64(num))
		m["blockTimestamp"] = quoted(hexutil.EncodeUint64(ts))
		m["from"] = quoted(strings.ToLower(senders[i].Hex()))
		m["gasPrice"] = quoted(hexutil.EncodeBig(price))
		m["transactionIndex"] = quoted(hexutil.EncodeUint64(uint64(i)))
		full[i] = objectJSON(m)

		r := receipts[i]
		r.TxHash, r.GasUsed, r.EffectiveGasPrice = hashes[i], shapeGasPerTx, price
		r.BlockHash, r.BlockNumber, r.TransactionIndex = hash, new(big.Int).SetUint64(num), uint(i)
		for _, l := range r.Logs {
			l.BlockNumber, l.TxHash, l.TxIndex, l.BlockHash, l.BlockTimestamp, l.Index = num, hashes[i], uint(i), hash, ts, logIndex
			logIndex++
		}
		raw, err = json.Marshal(r)
		if err != nil {
			return nil, err
		}
		m = map[string]json.RawMessage{}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			if string(v) == "null" && k != "contractAddress" {
				delete(m, k)
			}
		}
		m["from"] = quoted(strings.ToLower(senders[i].Hex()))
		m["to"] = quoted(strings.ToLower(tx.To().Hex()))
		receiptJSON[i] = objectJSON(m)
	}
	hashList := make([]json.RawMessage, len(hashes))
	for i, h := range hashes {
		hashList[i] = quoted(h.Hex())
	}
	fields["transactions"] = joinJSON(full)
	fullJSON := objectJSON(fields)
	fields["transactions"] = joinJSON(hashList)
	return &shapeBlock{num: num, hash: hash, full: fullJSON, hashes: objectJSON(fields), header: header,
		receipts: joinJSON(receiptJSON)}, nil
}

// joinJSON writes a JSON array of compact values, without encoding/json
// compacting them all again.
func joinJSON(vs []json.RawMessage) json.RawMessage {
	size := 2
	for _, v := range vs {
		size += len(v) + 1
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for i, v := range vs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, v...)
	}
	return append(buf, ']')
}

// objectJSON writes an object of compact values, keys sorted as a Go map
// marshals.
func objectJSON(m map[string]json.RawMessage) json.RawMessage {
	keys := make([]string, 0, len(m))
	size := 2
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	slices.Sort(keys)
	buf := make([]byte, 0, size)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendQuote(buf, k)
		buf = append(buf, ':')
		buf = append(buf, m[k]...)
	}
	return append(buf, '}')
}

func quoted(s string) json.RawMessage { return json.RawMessage(strconv.Quote(s)) }

// hook answers the block methods from the shape chain.
func (c *ShapeChain) hook(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
	switch method {
	case "eth_blockNumber":
		return quantity(c.Head()), nil, true
	case "eth_getBlockByNumber", "eth_getBlockByHash", "eth_getBlockReceipts":
	default:
		return nil, nil, false
	}
	var args []json.RawMessage
	if err := json.Unmarshal(params, &args); err != nil || len(args) == 0 {
		return nil, invalidParams("missing value for required argument 0"), true
	}
	b := c.lookup(args[0])
	if b == nil {
		return nil, nil, true // null
	}
	switch {
	case method == "eth_getBlockReceipts":
		return b.receipts, nil, true
	case len(args) > 1 && string(args[1]) == "true":
		return b.full, nil, true
	default:
		return b.hashes, nil, true
	}
}

// lookup finds the released block ref names: a tag, a number, a hash, or
// an object {"blockHash"} / {"blockNumber"}; nil when it is not served.
func (c *ShapeChain) lookup(ref json.RawMessage) *shapeBlock {
	head := c.head.Load()
	var s string
	if json.Unmarshal(ref, &s) != nil {
		var o struct {
			Hash   string `json:"blockHash"`
			Number string `json:"blockNumber"`
		}
		if json.Unmarshal(ref, &o) != nil {
			return nil
		}
		s = o.Hash + o.Number
	}
	var num uint64
	switch s {
	case "latest", "pending", "":
		return head
	case "safe":
		num = head.num - min(head.num, shapeSafe)
	case "finalized":
		num = head.num - min(head.num, shapeFinalized)
	case "earliest":
		num = 0
	default:
		if len(s) == 66 {
			c.mu.RLock()
			b := c.byHash[common.HexToHash(s)]
			c.mu.RUnlock()
			if b == nil || b.num > head.num {
				return nil
			}
			return b
		}
		v, err := hexutil.DecodeUint64(s)
		if err != nil {
			return nil
		}
		num = v
	}
	if num > head.num {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byNum[num]
}
