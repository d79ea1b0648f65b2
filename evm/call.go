package evm

import (
	"encoding/json"
)

// Call is one client call, parsed once by the router and read by every
// part of venn that answers or routes it; no package below the router
// reads its params again. Params stay the client's bytes, forwarded as
// sent.
//
// A call is read two ways. The routing reading (Block, Range) is venn's
// lenient one, which only chooses where a call goes: the node answers
// whatever it accepts. The exact reading (Exact and the fields after it)
// is geth's (v1.17.10): a store answers a call itself only when it reads
// as geth reads it, so that its answer is the node's; quantities with
// leading zeros, escaped strings, params of the wrong count or type,
// filter keys encoding/json would fold onto a field, all read not Exact
// and go to the node, which produces its own error or answer.
type Call struct {
	Method string
	Params json.RawMessage
	// Row is the method's registry row (Lookup); Kind, Class and BlockAt
	// are its, copied for the paths that read nothing else.
	Row   *Method
	Kind  Kind
	Class Class

	// BlockAt is the index of the param that carries the block the call
	// reads (BlockParamIndex), -1 when the method has none. BlockRaw is
	// that param as sent (nil when absent), Block its routing reading and
	// BlockOK whether that reading succeeded (absent or null reads
	// RefNone). A hash in Block may be left empty: BlockParam has it.
	BlockAt  int
	BlockRaw json.RawMessage
	Block    BlockRef
	BlockOK  bool

	// Range is an eth_getLogs filter's span as routing reads it; RangeOK
	// is false when the filter does not read (missing, malformed).
	Range   LogRange
	RangeOK bool

	// Exact reports that the params read as geth reads them; the fields
	// below are set only then.
	Exact bool
	// Ref is the block the call names: a tag or number, or RefHash with
	// the hash in Key (Ref.Hash is left empty). KindHeader and
	// KindUncleByIndex leave it unset: the eth_getBlockBy* call they are
	// built from reads it (BlockCall).
	Ref BlockRef
	// Key is the lowercase hash of a block by hash or of a transaction.
	Key [HashLen]byte
	// Full is eth_getBlockBy*'s second param: transaction objects.
	Full bool
	// Index is a transaction's or uncle's index in its block.
	Index uint64
	// Filter is eth_getLogs' filter; its values are sub-slices of Params.
	Filter LogFilter
	// arg0 is the first positional param, for BlockCall.
	arg0 []byte
}

// ParseCall reads a call once, for every part of venn that routes or
// answers it.
func ParseCall(method string, params json.RawMessage) (c Call) {
	// Fields are set in the result, not copied into it: a Call is large.
	m := Lookup(method)
	c.Method, c.Params, c.Row = method, params, m
	c.Kind, c.Class, c.BlockAt = m.Kind, m.Class, m.Block
	if m.Kind != KindOther || m.filter {
		c.readExact(m)
		if m.filter {
			c.readRange()
		}
	}
	if m.Block < 0 {
		return c
	}
	if c.Exact && m.Block == 0 && m.Kind != KindUncleByIndex {
		// Read exactly, the block param reads the same for routing
		// (FuzzParseCallBlock): no second reading. A hash is left
		// empty; BlockParam reads it for the one caller that needs it.
		c.BlockRaw, c.BlockOK = c.arg0, true
		c.Block = BlockRef{Kind: c.Ref.Kind, Number: c.Ref.Number}
		return c
	}
	c.BlockRaw = Param(params, c.BlockAt)
	ref, err := ParseBlockRef(c.BlockRaw)
	c.Block, c.BlockOK = ref, err == nil
	return c
}

// readExact reads the params as geth does for m; Exact stays false for
// anything geth would refuse or that this reader is not sure it reads the
// same.
func (c *Call) readExact(m *Method) {
	var a [2][]byte
	if !Args(c.Params, a[:m.args]) {
		return
	}
	c.arg0 = a[0]
	if m.filter {
		c.Exact = c.Filter.Parse(a[0])
		return
	}
	switch m.Kind {
	case KindBlockNumber:
		c.Exact = true
	case KindBlock:
		switch string(a[1]) {
		case "true":
			c.Full = true
		case "false":
		default:
			// geth takes null as false; unusual enough to leave to it.
			return
		}
		c.Exact = c.blockArg(a[0], m.ByHash)
	case KindBlockReceipts:
		c.Ref, c.Exact = ArgBlockNumberOrHash(a[0], &c.Key)
	case KindTx, KindReceipt:
		c.Exact = ArgHash(a[0], &c.Key)
	case KindTxByIndex:
		var ok bool
		if c.Index, ok = ArgQuantity(a[1]); ok {
			c.Exact = c.blockArg(a[0], m.ByHash)
		}
	case KindTxCount, KindUncleCount:
		c.Exact = c.blockArg(a[0], m.ByHash)
	case KindHeader:
		c.Exact = true
	case KindUncleByIndex:
		c.Index, c.Exact = ArgQuantity(a[1])
	}
	if !c.Exact {
		c.Ref, c.Full, c.Index = BlockRef{}, false, 0
	}
}

// blockArg reads a block argument as geth does: a number or tag as
// rpc.BlockNumber, or a hash as common.Hash.
func (c *Call) blockArg(raw []byte, byHash bool) bool {
	if byHash {
		c.Ref = BlockRef{Kind: RefHash}
		return ArgHash(raw, &c.Key)
	}
	var ok bool
	c.Ref, ok = ArgBlockNumber(raw)
	return ok
}

// readRange sets the routing reading of an eth_getLogs filter's span. An
// exactly read filter gives it at no cost; its absent bounds read latest,
// which routing takes as it takes absent ones.
func (c *Call) readRange() {
	if c.Exact {
		c.Range = LogRange{From: c.Filter.From, To: c.Filter.To, ByHash: c.Filter.ByHash}
		if c.Filter.ByHash {
			c.Range.From, c.Range.To = BlockRef{}, BlockRef{}
		}
		c.RangeOK = true
		return
	}
	lr, err := ParseLogRange(c.Params)
	c.Range, c.RangeOK = lr, err == nil
}

// BlockParam is the routing reading of the first param of a block call
// (eth_getBlockBy{Number,Hash}, eth_getBlockReceipts), by hash included;
// ok is false when it does not read. A hash is read here, on demand: only
// the caller that needs it pays for its copy.
func (c *Call) BlockParam() (BlockRef, bool) {
	if c.BlockAt == 0 && c.Block.Kind != RefHash {
		return c.Block, c.BlockOK
	}
	ref, err := ParseBlockRef(Param(c.Params, 0))
	return ref, err == nil
}

// ByHash reports a call that names its block by hash (exact reading).
func (c *Call) ByHash() bool { return c.Ref.Kind == RefHash }

// BlockCall is, for KindHeader and KindUncleByIndex, the
// eth_getBlockBy{Number,Hash}(block, false) call whose answer they are
// built from, its block argument as the client sent it; ok is false for
// any other call, or one not read Exact.
func (c *Call) BlockCall() (Call, bool) {
	if !c.Exact || c.Kind != KindHeader && c.Kind != KindUncleByIndex {
		return Call{}, false
	}
	method := "eth_getBlockByNumber"
	if c.Row.ByHash {
		method = "eth_getBlockByHash"
	}
	return ParseCall(method, json.RawMessage("["+string(c.arg0)+",false]")), true
}

// WithBlock returns the call with its block param replaced by block n
// (the router pins latest, safe and finalized to the cluster's numbers);
// ok is false when the call has no block param to replace.
func (c *Call) WithBlock(n uint64) (Call, bool) {
	p := *c
	ok := p.SetBlock(n)
	return p, ok
}

// SetBlock is WithBlock in place: a Call is large, and the router pins
// the one it holds. c is unchanged when ok is false.
func (c *Call) SetBlock(n uint64) bool {
	if c.BlockAt < 0 {
		return false
	}
	params, ok := WithParam(c.Params, c.BlockAt, `"`+Quantity(n)+`"`)
	if !ok {
		return false
	}
	if c.Kind != KindOther {
		// A store may answer it: read it again, as the new call it is.
		*c = ParseCall(c.Method, params)
		return true
	}
	c.Params = params
	c.BlockRaw = Param(params, c.BlockAt)
	c.Block, c.BlockOK = BlockRef{Kind: RefNumber, Number: n}, true
	return true
}

// WithBlockHash returns the call pinned by EIP-1898 to the block with
// hash (0x and 64 hex digits) that its number resolved to: a remote on
// another branch lacks that block and answers "header not found" rather
// than for its own block at the number. A call read by number keeps that
// number for routing (the pool sends it only to remotes that have
// reached it); ok is false when the call has no block param to replace.
func (c *Call) WithBlockHash(hash string) (Call, bool) {
	if c.BlockAt < 0 || !isHexLen(hash, 64) {
		return Call{}, false
	}
	params, ok := WithParam(c.Params, c.BlockAt, `{"blockHash":"`+hash+`"}`)
	if !ok {
		return Call{}, false
	}
	if c.Kind != KindOther {
		return ParseCall(c.Method, params), true
	}
	p := *c
	p.Params = params
	p.BlockRaw = Param(params, c.BlockAt)
	if c.Block.Kind != RefNumber || !c.BlockOK {
		p.Block, p.BlockOK = BlockRef{Kind: RefHash}, true
	}
	return p, true
}

// WithRange returns an eth_getLogs call over [from, to] with c's filter,
// every other field kept as sent (see the function WithRange).
func (c *Call) WithRange(from, to uint64) (Call, error) {
	params, err := WithRange(c.Params, from, to)
	if err != nil {
		return Call{}, err
	}
	return ParseCall(c.Method, params), nil
}

// BlockFetch is how the forger fetches the block an eth_getBlockReceipts
// call names, to build its receipts: the eth_getBlockBy{Number,Hash}
// method, the block argument as sent, and whether an EIP-1898 hash must be
// canonical. ok is false for pending (no receipts to build), params of
// another count, and anything that is not a block reference.
func (c *Call) BlockFetch() (method string, ref []byte, canonical, ok bool) {
	raw := c.arg0 // set when the params are one argument
	if c.Kind != KindBlockReceipts || len(raw) == 0 {
		return "", nil, false, false
	}
	block, err := c.Block, error(nil)
	if !c.BlockOK {
		err = errBadBlock
	}
	if raw[0] == '{' {
		var obj struct {
			BlockNumber      json.RawMessage `json:"blockNumber"`
			BlockHash        json.RawMessage `json:"blockHash"`
			RequireCanonical *bool           `json:"requireCanonical"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return "", nil, false, false
		}
		switch {
		case obj.BlockNumber != nil && obj.BlockHash != nil:
			return "", nil, false, false
		case obj.BlockHash != nil:
			return "eth_getBlockByHash", obj.BlockHash, obj.RequireCanonical != nil && *obj.RequireCanonical, true
		case obj.BlockNumber == nil:
			return "", nil, false, false
		}
		raw = obj.BlockNumber
		block, err = ParseBlockRef(raw)
	}
	switch {
	case raw[0] != '"', err != nil, block.Kind == RefPending:
		return "", nil, false, false
	case block.Kind == RefHash:
		return "eth_getBlockByHash", raw, false, true
	}
	return "eth_getBlockByNumber", raw, false, true
}
