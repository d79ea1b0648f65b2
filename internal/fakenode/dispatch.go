package fakenode

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/venn-gateway/venn/jrpc"
)

// codeServer is geth's code for errors without one of their own.
const codeServer = -32000

// contractCode is what eth_getCode returns for the log-emitting contracts.
const contractCode = `"0x6080604052348015600f57600080fd5b506004361060285760003560e01c8063a9059cbb14602d575b600080fd5b00"`

// revertSelector makes eth_call and eth_estimateGas revert like a contract
// calling revert("nope").
var revertSelector = []byte{0xde, 0xad, 0xbe, 0xef}

// revertData is the ABI encoding of Error("nope").
const revertData = `"0x08c379a0` +
	`0000000000000000000000000000000000000000000000000000000000000020` +
	`0000000000000000000000000000000000000000000000000000000000000004` +
	`6e6f706500000000000000000000000000000000000000000000000000000000"`

var (
	errNotificationsUnsupported = &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "notifications not supported"}
	errSubscriptionNotFound     = &jrpc.Error{Code: codeServer, Message: "subscription not found"}
	errHeaderNotFound           = &jrpc.Error{Code: codeServer, Message: "header not found"}
	errHashNotFound             = &jrpc.Error{Code: codeServer, Message: "header for hash not found"}
	errAlreadyKnown             = &jrpc.Error{Code: codeServer, Message: "already known"}
	errShortTypedTx             = &jrpc.Error{Code: codeServer, Message: "typed transaction too short"}
	errReverted                 = &jrpc.Error{Code: 3, Message: "execution reverted: nope", Data: json.RawMessage(revertData)}
)

// Results without parameters or state.
const (
	resultNull  = "null"
	resultFalse = "false"
	resultTrue  = "true"
)

func argErr(i int, err error) *jrpc.Error {
	return invalidParams("invalid argument " + strconv.Itoa(i) + ": " + err.Error())
}

func methodNotFound(method string) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "the method " + method + " does not exist/is not available"}
}

// decodeArg decodes one argument as geth does: a type that unmarshals
// itself is called directly, so its own error text reaches the client.
func decodeArg(raw []byte, dst any) error {
	if u, ok := dst.(json.Unmarshaler); ok {
		return u.UnmarshalJSON(raw)
	}
	return json.Unmarshal(raw, dst)
}

func quantity(v uint64) []byte { return appendQuantity(make([]byte, 0, 20), v) }

// serveCall answers one call: faults first, then the hook, then the chain.
func (n *Node) serveCall(c *call, f *faults, method string, params []byte) ([]byte, *jrpc.Error) {
	if f.rpcErr != nil {
		return nil, f.rpcErr
	}
	if f.echo != nil && c.req != nil {
		return nil, f.echo(c.req)
	}
	if h := n.hook.Load(); h != nil {
		// A copy: params point into a pooled buffer the hook may outlive.
		res, rerr, handled := (*h)(method, append(json.RawMessage(nil), params...))
		if handled {
			if rerr != nil {
				return nil, rerr
			}
			if res == nil {
				return []byte(resultNull), nil
			}
			return res, nil
		}
	}
	v := c.view
	if f.bogusHead != 0 {
		if res, ok := n.bogus(v, f.bogusHead, method, params); ok {
			return res, nil
		}
	}
	switch method {
	case "eth_getBalance":
		return n.getBalance(v, params)
	case "eth_blockNumber":
		return noArgs(params, quantity(v.visible()))
	case "eth_chainId":
		return noArgs(params, quantity(n.chainID(v, f)))
	case "net_version":
		return noArgs(params, strconv.AppendQuote(nil, strconv.FormatUint(n.chainID(v, f), 10)))
	case "web3_clientVersion":
		return noArgs(params, strconv.AppendQuote(nil, n.opts.ClientVersion))
	case "eth_syncing":
		return noArgs(params, []byte(resultFalse))
	case "net_listening":
		return noArgs(params, []byte(resultTrue))
	case "net_peerCount":
		return noArgs(params, quantity(0))
	case "eth_gasPrice":
		return noArgs(params, quantity(baseFeeAt(v.visible())+tipWei))
	case "eth_maxPriorityFeePerGas":
		return noArgs(params, quantity(tipWei))
	case "web3_sha3":
		return web3Sha3(params)
	case "eth_getTransactionCount":
		return n.getTransactionCount(v, params)
	case "eth_getCode":
		return n.getCode(v, params)
	case "eth_getStorageAt":
		return n.getStorageAt(v, params)
	case "eth_call":
		return n.ethCall(v, params, false)
	case "eth_estimateGas":
		return n.ethCall(v, params, true)
	case "eth_getBlockByNumber":
		return n.getBlockByNumber(v, params)
	case "eth_getBlockByHash":
		return n.getBlockByHash(v, params)
	case "eth_getBlockTransactionCountByNumber", "eth_getBlockTransactionCountByHash":
		return n.getBlockTxCount(v, params, method == "eth_getBlockTransactionCountByHash")
	case "eth_getTransactionByBlockNumberAndIndex", "eth_getTransactionByBlockHashAndIndex":
		return n.getTxByBlockAndIndex(v, params, method == "eth_getTransactionByBlockHashAndIndex")
	case "eth_getTransactionByHash":
		return n.getTxByHash(v, params, false)
	case "eth_getTransactionReceipt":
		return n.getTxByHash(v, params, true)
	case "eth_getBlockReceipts":
		return n.getBlockReceipts(v, params)
	case "eth_getLogs":
		return n.getLogs(v, f, params)
	case "eth_sendRawTransaction":
		return n.sendRawTransaction(params)
	case "eth_newPendingTransactionFilter":
		return n.newPendingFilter(params)
	case "eth_getFilterChanges":
		return n.filterChanges(params)
	case "eth_uninstallFilter":
		return n.uninstallFilter(params)
	}
	switch {
	case strings.HasSuffix(method, "_subscribe"):
		return n.subscribe(c, method, params)
	case strings.HasSuffix(method, "_unsubscribe"):
		return n.unsubscribe(c, params)
	}
	return nil, methodNotFound(method)
}

func (n *Node) chainID(v *chainView, f *faults) uint64 {
	if f.chainID != 0 {
		return f.chainID
	}
	return n.chainOf(v)
}

// noArgs returns result unless params carry arguments the method takes
// none of.
func noArgs(params, result []byte) ([]byte, *jrpc.Error) {
	p := bytes.TrimSpace(params)
	if len(p) == 0 || string(p) == "[]" || string(p) == resultNull {
		return result, nil
	}
	if _, rerr := splitArgs(params, nil, 0, 0); rerr != nil {
		return nil, rerr
	}
	return result, nil
}

// resolve turns a block number or tag into a number against view v. The
// result may lie above the visible head.
func (n *Node) resolve(v *chainView, bn rpc.BlockNumber) uint64 {
	switch bn {
	case rpc.LatestBlockNumber, rpc.PendingBlockNumber:
		return v.visible()
	case rpc.EarliestBlockNumber:
		return 0
	case rpc.SafeBlockNumber:
		return v.below(n.opts.SafeDepth)
	case rpc.FinalizedBlockNumber:
		return v.below(n.opts.FinalizedDepth)
	}
	return uint64(bn)
}

// fastQuantity parses a quoted canonical hex quantity ("0x1a") without
// going through encoding/json; ok false means "take the slow path", which
// also produces geth's error for malformed input.
func fastQuantity(raw []byte) (uint64, bool) {
	if len(raw) < 5 || len(raw) > 20 || raw[0] != '"' || raw[1] != '0' || raw[2] != 'x' || raw[len(raw)-1] != '"' {
		return 0, false
	}
	digits := raw[3 : len(raw)-1]
	if len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	var v uint64
	for _, c := range digits {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, v <= 1<<63-1
}

// stateNumber resolves the optional block parameter of a state method
// (eth_getBalance and friends) at position idx; raw nil means latest.
func (n *Node) stateNumber(v *chainView, raw []byte, idx int) (uint64, *jrpc.Error) {
	vis := v.visible()
	if raw == nil || string(raw) == `"latest"` || string(raw) == `"pending"` {
		return vis, nil
	}
	num, ok := fastQuantity(raw)
	if !ok {
		var bnh rpc.BlockNumberOrHash
		if err := bnh.UnmarshalJSON(raw); err != nil {
			return 0, argErr(idx, err)
		}
		if h, isHash := bnh.Hash(); isHash {
			found, ok := n.hasherOf(v).findBlock(v, h)
			if !ok {
				return 0, errHashNotFound
			}
			return found, nil
		}
		bn, _ := bnh.Number()
		num = n.resolve(v, bn)
	}
	if num > vis {
		return 0, errHeaderNotFound
	}
	if k := n.faults.Load().stateKeep; k > 0 && num+k < vis {
		return 0, missingTrieNode(n.hasherOf(v).block(num, stateRootSalt).Hex())
	}
	return num, nil
}

// stateRootSalt makes the synthetic state root a missing trie node names.
const stateRootSalt = 0x57a7e

// missingTrieNode is geth's answer for state a pruned node no longer has:
// the state root's node is gone.
func missingTrieNode(root string) *jrpc.Error {
	return &jrpc.Error{Code: codeServer, Message: "missing trie node " + root + " (path )"}
}

// parseAddress decodes an address argument, quickly when it is canonical.
func parseAddress(raw []byte) (common.Address, error) {
	var a common.Address
	if len(raw) == 2+2+2*common.AddressLength && raw[0] == '"' && raw[1] == '0' && raw[2] == 'x' && raw[len(raw)-1] == '"' {
		if _, err := hex.Decode(a[:], raw[3:len(raw)-1]); err == nil {
			return a, nil
		}
	}
	err := a.UnmarshalJSON(raw)
	return a, err
}

// addrState parses (address, block?) plus extra optional arguments.
func (n *Node) addrState(v *chainView, params []byte) (common.Address, uint64, *jrpc.Error) {
	var store [2][]byte
	args, rerr := splitArgs(params, store[:0], 2, 1)
	if rerr != nil {
		return common.Address{}, 0, rerr
	}
	addr, err := parseAddress(args[0])
	if err != nil {
		return common.Address{}, 0, argErr(0, err)
	}
	num, rerr := n.stateNumber(v, args[1], 1)
	return addr, num, rerr
}

func addrKey(a common.Address) uint64 {
	return mix64(binary.BigEndian.Uint64(a[0:]) ^ mix64(binary.BigEndian.Uint64(a[8:])^uint64(binary.BigEndian.Uint32(a[16:]))))
}

// balanceOf is an account's balance at a block: below 1 ether, growing by
// 1 gwei a block, so that different blocks give different answers.
func balanceOf(a common.Address, num uint64) uint64 {
	return addrKey(a)%1_000_000_000_000_000_000 + num*1_000_000_000
}

func (n *Node) getBalance(v *chainView, params []byte) ([]byte, *jrpc.Error) {
	addr, num, rerr := n.addrState(v, params)
	if rerr != nil {
		return nil, rerr
	}
	return quantity(balanceOf(addr, num)), nil
}

func (n *Node) senderIndex(a common.Address) int {
	for i := range n.tables.senders {
		if n.tables.senders[i] == a {
			return i
		}
	}
	return -1
}

func (n *Node) contractIndex(a common.Address) int {
	for i := range n.tables.contracts {
		if n.tables.contracts[i] == a {
			return i
		}
	}
	return -1
}

// nonceOf is the nonce of global transaction g: the sender's earlier
// transactions. Genesis has none, so the first two senders start one
// period later.
func nonceOf(g uint64) uint64 {
	s := uint64(senderOf(g))
	k := g / uint64(len(senderHex))
	if s < txsPerBlock {
		k--
	}
	return k
}

// txCount is how many transactions sender s sent in blocks up to num.
func txCount(s int, num uint64) uint64 {
	last := num*txsPerBlock + txsPerBlock - 1 // highest g in block num
	if last < uint64(s) {
		return 0
	}
	c := (last-uint64(s))/uint64(len(senderHex)) + 1
	if s < txsPerBlock {
		c-- // g = s would be in genesis
	}
	return c
}

func (n *Node) getTransactionCount(v *chainView, params []byte) ([]byte, *jrpc.Error) {
	addr, num, rerr := n.addrState(v, params)
	if rerr != nil {
		return nil, rerr
	}
	if s := n.senderIndex(addr); s >= 0 {
		return quantity(txCount(s, num)), nil
	}
	return quantity(0), nil
}

func (n *Node) getCode(v *chainView, params []byte) ([]byte, *jrpc.Error) {
	addr, _, rerr := n.addrState(v, params)
	if rerr != nil {
		return nil, rerr
	}
	if n.contractIndex(addr) >= 0 {
		return []byte(contractCode), nil
	}
	return []byte(`"0x"`), nil
}

func (n *Node) getStorageAt(v *chainView, params []byte) ([]byte, *jrpc.Error) {
	var store [3][]byte
	args, rerr := splitArgs(params, store[:0], 3, 2)
	if rerr != nil {
		return nil, rerr
	}
	addr, err := parseAddress(args[0])
	if err != nil {
		return nil, argErr(0, err)
	}
	var key string
	if err := json.Unmarshal(args[1], &key); err != nil {
		return nil, argErr(1, err)
	}
	num, rerr := n.stateNumber(v, args[2], 2)
	if rerr != nil {
		return nil, rerr
	}
	if n.contractIndex(addr) < 0 {
		return appendData(nil, make([]byte, 32)), nil
	}
	w := derive(crypto.Keccak256Hash([]byte(key)), addrKey(addr)^num)
	return appendHash(nil, w), nil
}

func web3Sha3(params []byte) ([]byte, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 1)
	if rerr != nil {
		return nil, rerr
	}
	var in hexutil.Bytes
	if err := decodeArg(args[0], &in); err != nil {
		return nil, argErr(0, err)
	}
	return appendHash(nil, crypto.Keccak256Hash(in)), nil
}

// txArgs are the fields of geth's TransactionArgs that eth_call and
// eth_estimateGas look at.
type txArgs struct {
	to   *common.Address
	data []byte
}

func parseTxArgs(raw []byte) (txArgs, error) {
	// Named as geth's type, so that decode errors read the same.
	type TransactionArgs struct {
		From                 *common.Address `json:"from"`
		To                   *common.Address `json:"to"`
		Gas                  *hexutil.Uint64 `json:"gas"`
		GasPrice             *hexutil.Big    `json:"gasPrice"`
		MaxFeePerGas         *hexutil.Big    `json:"maxFeePerGas"`
		MaxPriorityFeePerGas *hexutil.Big    `json:"maxPriorityFeePerGas"`
		Value                *hexutil.Big    `json:"value"`
		Nonce                *hexutil.Uint64 `json:"nonce"`
		Data                 *hexutil.Bytes  `json:"data"`
		Input                *hexutil.Bytes  `json:"input"`
		ChainID              *hexutil.Big    `json:"chainId"`
	}
	var a TransactionArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return txArgs{}, err
	}
	out := txArgs{to: a.To}
	switch {
	case a.Input != nil:
		out.data = *a.Input
	case a.Data != nil:
		out.data = *a.Data
	}
	return out, nil
}

// txArgsErr reports geth's checks of TransactionArgs beyond decoding.
func txArgsErr(raw []byte) *jrpc.Error {
	var a struct {
		GasPrice *hexutil.Big   `json:"gasPrice"`
		MaxFee   *hexutil.Big   `json:"maxFeePerGas"`
		MaxTip   *hexutil.Big   `json:"maxPriorityFeePerGas"`
		Data     *hexutil.Bytes `json:"data"`
		Input    *hexutil.Bytes `json:"input"`
	}
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	if a.GasPrice != nil && (a.MaxFee != nil || a.MaxTip != nil) {
		return &jrpc.Error{Code: codeServer, Message: "both gasPrice and (maxFeePerGas or maxPriorityFeePerGas) specified"}
	}
	if a.Data != nil && a.Input != nil && !bytes.Equal(*a.Data, *a.Input) {
		return &jrpc.Error{Code: codeServer, Message: `both "data" and "input" are set and not equal. Please use "input" to pass transaction call data`}
	}
	return nil
}

// ethCall serves eth_call and eth_estimateGas: (args, block?, state
// overrides?, block overrides?).
func (n *Node) ethCall(v *chainView, params []byte, estimate bool) ([]byte, *jrpc.Error) {
	var store [4][]byte
	args, rerr := splitArgs(params, store[:0], 4, 1)
	if rerr != nil {
		return nil, rerr
	}
	tx, err := parseTxArgs(args[0])
	if err != nil {
		return nil, argErr(0, err)
	}
	num, rerr := n.stateNumber(v, args[1], 1)
	if rerr != nil {
		return nil, rerr
	}
	if rerr := txArgsErr(args[0]); rerr != nil {
		return nil, rerr
	}
	if bytes.HasPrefix(tx.data, revertSelector) {
		return nil, errReverted
	}
	isContract := tx.to != nil && n.contractIndex(*tx.to) >= 0
	if estimate {
		gas := uint64(21_000)
		for _, b := range tx.data {
			if b == 0 {
				gas += 4
			} else {
				gas += 16
			}
		}
		if isContract || tx.to == nil {
			gas += 25_000
		}
		return quantity(gas), nil
	}
	if !isContract {
		return []byte(`"0x"`), nil
	}
	w := derive(crypto.Keccak256Hash(tx.data), addrKey(*tx.to)^num)
	return appendHash(nil, w), nil
}

func (n *Node) getBlockByNumber(v *chainView, params []byte) ([]byte, *jrpc.Error) {
	var store [2][]byte
	args, rerr := splitArgs(params, store[:0], 2, 2)
	if rerr != nil {
		return nil, rerr
	}
	var bn rpc.BlockNumber
	if err := decodeArg(args[0], &bn); err != nil {
		return nil, argErr(0, err)
	}
	var full bool
	if err := json.Unmarshal(args[1], &full); err != nil {
		return nil, argErr(1, err)
	}
	num := n.resolve(v, bn)
	if num > v.visible() {
		return []byte(resultNull), nil
	}
	return n.appendBlock(nil, n.block(v, num), full), nil
}

func (n *Node) getBlockByHash(v *chainView, params []byte) ([]byte, *jrpc.Error) {
	var store [2][]byte
	args, rerr := splitArgs(params, store[:0], 2, 2)
	if rerr != nil {
		return nil, rerr
	}
	var h common.Hash
	if err := decodeArg(args[0], &h); err != nil {
		return nil, argErr(0, err)
	}
	var full bool
	if err := json.Unmarshal(args[1], &full); err != nil {
		return nil, argErr(1, err)
	}
	num, ok := n.hasherOf(v).findBlock(v, h)
	if !ok {
		return []byte(resultNull), nil
	}
	return n.appendBlock(nil, n.block(v, num), full), nil
}

// blockArg decodes a block number (byHash false) or hash argument and
// resolves it to a visible block.
func (n *Node) blockArg(v *chainView, raw []byte, byHash bool) (uint64, bool, error) {
	if byHash {
		var h common.Hash
		if err := decodeArg(raw, &h); err != nil {
			return 0, false, err
		}
		num, ok := n.hasherOf(v).findBlock(v, h)
		return num, ok, nil
	}
	var bn rpc.BlockNumber
	if err := decodeArg(raw, &bn); err != nil {
		return 0, false, err
	}
	num := n.resolve(v, bn)
	return num, num <= v.visible(), nil
}

func (n *Node) getBlockTxCount(v *chainView, params []byte, byHash bool) ([]byte, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 1)
	if rerr != nil {
		return nil, rerr
	}
	num, ok, err := n.blockArg(v, args[0], byHash)
	if err != nil {
		return nil, argErr(0, err)
	}
	if !ok {
		return []byte(resultNull), nil
	}
	if num == 0 {
		return quantity(0), nil
	}
	return quantity(txsPerBlock), nil
}

func (n *Node) getTxByBlockAndIndex(v *chainView, params []byte, byHash bool) ([]byte, *jrpc.Error) {
	var store [2][]byte
	args, rerr := splitArgs(params, store[:0], 2, 2)
	if rerr != nil {
		return nil, rerr
	}
	num, ok, err := n.blockArg(v, args[0], byHash)
	if err != nil {
		return nil, argErr(0, err)
	}
	var idx hexutil.Uint
	if err := decodeArg(args[1], &idx); err != nil {
		return nil, argErr(1, err)
	}
	if !ok {
		return []byte(resultNull), nil
	}
	b := n.block(v, num)
	if int(idx) >= len(b.txs) {
		return []byte(resultNull), nil
	}
	return n.appendTx(nil, b, &b.txs[idx]), nil
}

func (n *Node) getTxByHash(v *chainView, params []byte, receipt bool) ([]byte, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 1)
	if rerr != nil {
		return nil, rerr
	}
	var h common.Hash
	if err := decodeArg(args[0], &h); err != nil {
		return nil, argErr(0, err)
	}
	num, idx, ok := n.hasherOf(v).findTx(v, h)
	if !ok {
		return []byte(resultNull), nil
	}
	b := n.block(v, num)
	if receipt {
		return n.appendReceipt(nil, b, &b.txs[idx]), nil
	}
	return n.appendTx(nil, b, &b.txs[idx]), nil
}

func (n *Node) getBlockReceipts(v *chainView, params []byte) ([]byte, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 1)
	if rerr != nil {
		return nil, rerr
	}
	var bnh rpc.BlockNumberOrHash
	if err := decodeArg(args[0], &bnh); err != nil {
		return nil, argErr(0, err)
	}
	var num uint64
	if h, ok := bnh.Hash(); ok {
		found, ok := n.hasherOf(v).findBlock(v, h)
		if !ok {
			return []byte(resultNull), nil
		}
		num = found
	} else {
		bn, _ := bnh.Number()
		num = n.resolve(v, bn)
		if num > v.visible() {
			return []byte(resultNull), nil
		}
	}
	b := n.block(v, num)
	buf := append(make([]byte, 0, 2048), '[')
	for i := range b.txs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = n.appendReceipt(buf, b, &b.txs[i])
	}
	return append(buf, ']'), nil
}

// sendRawTransaction answers with the transaction hash (keccak256 of the
// raw bytes) and remembers it: the same bytes again are "already known".
// The bytes are not decoded, so tests may send any payload.
func (n *Node) sendRawTransaction(params []byte) ([]byte, *jrpc.Error) {
	var store [1][]byte
	args, rerr := splitArgs(params, store[:0], 1, 1)
	if rerr != nil {
		return nil, rerr
	}
	var raw hexutil.Bytes
	if err := decodeArg(args[0], &raw); err != nil {
		return nil, argErr(0, err)
	}
	if len(raw) <= 1 && (len(raw) == 0 || raw[0] <= 0x7f) {
		return nil, errShortTypedTx
	}
	h := crypto.Keccak256Hash(raw)
	n.txMu.Lock()
	_, known := n.sent[h]
	n.sent[h] = struct{}{}
	n.txMu.Unlock()
	if known {
		return nil, errAlreadyKnown
	}
	n.pending.add(h)
	n.notifyPending(h)
	return appendHash(nil, h), nil
}
