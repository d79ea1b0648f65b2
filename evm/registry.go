package evm

import (
	"slices"
	"strings"
)

// Method is one row of the method registry: everything venn knows of a
// method, read once by ParseCall (Call.Row) and by every part of venn that
// routes, sends, caches or counts it. Adding a method is adding its row to
// registry.
type Method struct {
	// Name is the method's name; empty for a method the registry does not
	// list (Lookup gives it one of a few shared rows).
	Name string
	// Kind is what a store that answers the call itself reads of it.
	Kind Kind
	// Class is how the call may be sent to the remotes.
	Class Class
	// Block is the index of the positional param that carries the block
	// the call reads (a number, tag or EIP-1898 object) for routing and
	// caching; -1 when it has none.
	Block int
	// ByHash reports a method that names its block, or transaction, by
	// hash (eth_getBlockByHash, eth_getTransactionReceipt, ...).
	ByHash bool
	// Data is the kind of historical data the call reads at its block, which
	// a pruned or history-expired remote may not keep.
	Data DataKind
	// Label is the method as a metric label: its name, or "other" for any
	// method the registry does not list, so that a hostile client cannot
	// grow the label space.
	Label string

	// args is the number of positional params geth takes, for the exact
	// reading (Call.Exact), of a Kind other than KindOther or a filter.
	args int8
	// filter: its first param is a log filter, read as eth_getLogs reads
	// it (eth_getLogs, eth_newFilter).
	filter bool
	// shapes are what its positional params hold, for their canonical
	// spelling (Call.Canonical); a param past them, or of a method without
	// them, is plain JSON.
	shapes []argShape
}

// Hedgeable reports a method that may be hedged, retried on another remote,
// shared between identical concurrent calls or put to a vote: a read.
func (m *Method) Hedgeable() bool { return m.Class == ClassRead }

// DataKind is a kind of historical data a remote may not keep.
type DataKind uint8

const (
	DataNone   DataKind = iota // no historical data (or none routed on)
	DataState                  // account state at a block (eth_getBalance, eth_call, ...)
	DataBlocks                 // block bodies and receipts by number
	DataLogs                   // eth_getLogs
	DataTraces                 // trace_* and debug_trace* at a block
	NumDataKinds
)

func (k DataKind) String() string {
	switch k {
	case DataState:
		return "state"
	case DataBlocks:
		return "blocks"
	case DataLogs:
		return "logs"
	case DataTraces:
		return "traces"
	}
	return "none"
}

// none is a Block for a method without a block param.
const none = -1

// Argument shapes of the methods whose params have more than a block to
// spell canonically. The storage keys of eth_getProof stay as sent: geth's
// answer repeats them as spelt.
var (
	txAt1      = []argShape{argTx, argBlock}
	addressAt1 = []argShape{argAddress, argBlock}
)

// registry is venn's one method table: every method it knows by name.
var registry = index([]Method{
	// Answered by the stores and the forger (Kind), or built by it.
	{Name: "eth_blockNumber", Kind: KindBlockNumber, Block: none},
	{Name: "eth_getBlockByNumber", Kind: KindBlock, args: 2, Block: 0, Data: DataBlocks},
	{Name: "eth_getBlockByHash", Kind: KindBlock, args: 2, Block: none, ByHash: true},
	{Name: "eth_getBlockReceipts", Kind: KindBlockReceipts, args: 1, Block: 0, Data: DataBlocks},
	{Name: "eth_getTransactionByHash", Kind: KindTx, args: 1, Block: none, ByHash: true},
	{Name: "eth_getTransactionReceipt", Kind: KindReceipt, args: 1, Block: none, ByHash: true},
	{Name: "eth_getTransactionByBlockNumberAndIndex", Kind: KindTxByIndex, args: 2, Block: 0, Data: DataBlocks},
	{Name: "eth_getTransactionByBlockHashAndIndex", Kind: KindTxByIndex, args: 2, Block: none, ByHash: true},
	{Name: "eth_getBlockTransactionCountByNumber", Kind: KindTxCount, args: 1, Block: 0, Data: DataBlocks},
	{Name: "eth_getBlockTransactionCountByHash", Kind: KindTxCount, args: 1, Block: none, ByHash: true},
	{Name: "eth_getUncleCountByBlockNumber", Kind: KindUncleCount, args: 1, Block: 0, Data: DataBlocks},
	{Name: "eth_getUncleCountByBlockHash", Kind: KindUncleCount, args: 1, Block: none, ByHash: true},
	{Name: "eth_getLogs", Kind: KindLogs, args: 1, filter: true, Block: none, Data: DataLogs},
	{Name: "eth_getHeaderByNumber", Kind: KindHeader, args: 1, Block: none},
	{Name: "eth_getHeaderByHash", Kind: KindHeader, args: 1, Block: none, ByHash: true},
	{Name: "eth_getUncleByBlockNumberAndIndex", Kind: KindUncleByIndex, args: 2, Block: 0, Data: DataBlocks},
	{Name: "eth_getUncleByBlockHashAndIndex", Kind: KindUncleByIndex, args: 2, Block: none, ByHash: true},

	// Reads at a block: routed, and cacheable, by it.
	{Name: "eth_getBalance", Block: 1, Data: DataState, shapes: addressAt1},
	{Name: "eth_getCode", Block: 1, Data: DataState, shapes: addressAt1},
	{Name: "eth_getTransactionCount", Block: 1, Data: DataState, shapes: addressAt1},
	{Name: "eth_getStorageAt", Block: 2, Data: DataState, shapes: []argShape{argAddress, argSlot, argBlock}},
	{Name: "eth_getProof", Block: 2, Data: DataState, shapes: []argShape{argAddress, argJSON, argBlock}},
	{Name: "eth_getStorageValues", Block: 1, Data: DataState},
	{Name: "eth_call", Block: 1, Data: DataState, shapes: txAt1},
	{Name: "eth_estimateGas", Block: 1, Data: DataState, shapes: txAt1},
	{Name: "eth_createAccessList", Block: 1, Data: DataState, shapes: txAt1},
	{Name: "eth_simulateV1", Block: 1, Data: DataState},
	{Name: "eth_feeHistory", Block: 1},
	{Name: "debug_traceCall", Block: 1, Data: DataTraces, shapes: txAt1},
	{Name: "trace_call", Block: 2, Data: DataTraces, shapes: []argShape{argTx, argJSON, argBlock}},
	{Name: "debug_traceBlockByNumber", Block: 0, Data: DataTraces},
	{Name: "debug_traceBlockByHash", Block: 0, Data: DataTraces},
	{Name: "trace_block", Block: 0, Data: DataTraces},
	{Name: "trace_replayBlockTransactions", Block: 0, Data: DataTraces},
	{Name: "debug_getRawBlock", Block: 0, Data: DataBlocks},
	{Name: "debug_getRawHeader", Block: 0, Data: DataBlocks},
	{Name: "debug_getRawReceipts", Block: 0, Data: DataBlocks},

	// Other reads.
	{Name: "eth_callMany", Block: none, Data: DataState},
	{Name: "debug_traceTransaction", Block: none, Data: DataTraces},
	{Name: "trace_filter", Block: none, Data: DataTraces},
	{Name: "trace_replayTransaction", Block: none, Data: DataTraces},
	{Name: "trace_transaction", Block: none, Data: DataTraces},
	{Name: "eth_accounts", Block: none}, {Name: "eth_blobBaseFee", Block: none},
	{Name: "eth_capabilities", Block: none}, {Name: "eth_chainId", Block: none},
	{Name: "eth_coinbase", Block: none}, {Name: "eth_config", Block: none},
	{Name: "eth_gasPrice", Block: none}, {Name: "eth_maxPriorityFeePerGas", Block: none},
	{Name: "eth_mining", Block: none}, {Name: "eth_protocolVersion", Block: none},
	{Name: "eth_syncing", Block: none}, {Name: "eth_baseFee", Block: none},
	{Name: "eth_hashrate", Block: none}, {Name: "net_listening", Block: none},
	{Name: "net_peerCount", Block: none}, {Name: "net_version", Block: none},
	{Name: "web3_clientVersion", Block: none}, {Name: "web3_sha3", Block: none},
	{Name: "debug_getRawTransaction", Block: none}, {Name: "txpool_content", Block: none},
	{Name: "txpool_contentFrom", Block: none}, {Name: "txpool_inspect", Block: none},
	{Name: "txpool_status", Block: none},

	// Stateful: the answer belongs to one remote's (or venn's) state.
	{Name: "eth_newFilter", Class: ClassStateful, args: 1, filter: true, Block: none},
	{Name: "eth_newBlockFilter", Class: ClassStateful, Block: none},
	{Name: "eth_newPendingTransactionFilter", Class: ClassStateful, Block: none},
	{Name: "eth_getFilterChanges", Class: ClassStateful, Block: none},
	{Name: "eth_getFilterLogs", Class: ClassStateful, Block: none},
	{Name: "eth_uninstallFilter", Class: ClassStateful, Block: none},
	{Name: "eth_subscribe", Class: ClassStateful, Block: none},
	{Name: "eth_unsubscribe", Class: ClassStateful, Block: none},

	// Writes.
	{Name: "eth_sendRawTransaction", Class: ClassBroadcast, Block: none},
	{Name: "eth_sendTransaction", Class: ClassWrite, Block: none},
	{Name: "eth_sign", Class: ClassWrite, Block: none},
	{Name: "eth_signTransaction", Class: ClassWrite, Block: none},
	{Name: "testing_buildBlockV1", Class: ClassWrite, Block: none},
})

// index keys the rows by name and labels each with it.
func index(rows []Method) map[string]*Method {
	m := make(map[string]*Method, len(rows))
	for i := range rows {
		r := &rows[i]
		if _, dup := m[r.Name]; dup {
			panic("evm: method " + r.Name + " registered twice")
		}
		r.Label = r.Name
		m[r.Name] = r
	}
	return m
}

// unlisted are the rows of the methods the registry does not list, by
// whether the name reads as a write and whether it reads as a trace.
var unlisted = func() (rows [2][2]Method) {
	for w, class := range [2]Class{ClassRead, ClassWrite} {
		for t, data := range [2]DataKind{DataNone, DataTraces} {
			rows[w][t] = Method{Class: class, Block: none, Data: data, Label: "other"}
		}
	}
	return rows
}()

// Lookup is method's row: its own, or for a method the registry does not
// list, a shared row that its name decides (writeName, a trace_ or
// debug_trace prefix). It is never nil.
func Lookup(method string) *Method {
	if m, ok := registry[method]; ok {
		return m
	}
	ns, name, ok := strings.Cut(method, "_")
	if !ok {
		return &unlisted[0][0]
	}
	w, t := 0, 0
	if writeName(ns, name) {
		w = 1
	}
	if ns == "trace" || ns == "debug" && strings.HasPrefix(name, "trace") {
		t = 1
	}
	return &unlisted[w][t]
}

// MethodLabel bounds a method name for use as a metric label
// (Method.Label).
func MethodLabel(method string) string {
	if m, ok := registry[method]; ok {
		return m.Label
	}
	return "other"
}

// BlockParamIndex returns where method carries the block it reads: the
// index of its block number, tag or EIP-1898 object in the positional
// params (Method.Block).
func BlockParamIndex(method string) (int, bool) {
	b := Lookup(method).Block
	return b, b >= 0
}

// IsWrite reports methods that change state somewhere (ClassWrite and
// ClassBroadcast): they are never retried blindly, hedged or deduplicated.
func IsWrite(method string) bool {
	c := Lookup(method).Class
	return c == ClassWrite || c == ClassBroadcast
}

// IsStateful reports methods whose answer depends on state held by one
// remote (installed filters, subscriptions): they must not be shared
// between concurrent callers.
func IsStateful(method string) bool { return Lookup(method).Class == ClassStateful }

// writeName reports a method the registry does not list, named ns_name,
// that is taken for a write: one in a namespace that administers a node,
// or whose name says it sends, signs, submits or sets something
// (eth_sendRawTransactionSync, eth_sendUserOperation, eth_submitWork).
// Retrying a read once too few costs a call, retrying a write once too
// many can cost the client money.
func writeName(ns, name string) bool {
	switch ns {
	case "admin", "personal", "miner", "engine", "clique":
		return true
	}
	for _, verb := range []string{"send", "sign", "submit", "set", "cancel", "import", "unlock"} {
		if strings.HasPrefix(name, verb) {
			return true
		}
	}
	return false
}

// Kind is what a call reads, for the parts of venn that answer it from
// blocks they hold (the head window, the history store, the forger).
// KindOther is every call only a node answers.
type Kind uint8

const (
	KindOther         Kind = iota
	KindBlockNumber        // eth_blockNumber
	KindBlock              // eth_getBlockBy{Number,Hash}
	KindBlockReceipts      // eth_getBlockReceipts
	KindTx                 // eth_getTransactionByHash
	KindReceipt            // eth_getTransactionReceipt
	KindTxByIndex          // eth_getTransactionByBlock{Number,Hash}AndIndex
	KindTxCount            // eth_getBlockTransactionCountBy{Number,Hash}
	KindUncleCount         // eth_getUncleCountByBlock{Number,Hash}
	KindLogs               // eth_getLogs
	KindHeader             // eth_getHeaderBy{Number,Hash}
	KindUncleByIndex       // eth_getUncleByBlock{Number,Hash}AndIndex
)

// Class is how a call may be sent to the remotes.
type Class uint8

const (
	ClassRead      Class = iota // may be retried, hedged, shared and voted on
	ClassWrite                  // changes state somewhere: one remote, no failover once sent (IsWrite)
	ClassStateful               // its answer belongs to one remote's state (IsStateful)
	ClassBroadcast              // eth_sendRawTransaction: sent to every remote
)

// argShape is what one positional param of a method holds, for its
// canonical spelling.
type argShape uint8

const (
	argJSON    argShape = iota // any JSON: key order and whitespace only
	argAddress                 // a 20-byte address: case
	argSlot                    // a storage slot as eth_getStorageAt reads it: padded to 32 bytes
	argTx                      // transaction arguments (eth_call's first param)
	argBlock                   // the block: read into Canonical.Block
)

// Methods is the names of the methods the registry lists, sorted: what a
// chain is known to serve (gRPC Describe's supportedMethods). A method not
// listed is still passed to the remotes.
func Methods() []string {
	out := make([]string, 0, len(registry))
	for name := range registry {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
