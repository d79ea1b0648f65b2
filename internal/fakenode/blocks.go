package fakenode

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// Fixed values geth reports for post-merge (Prague) blocks.
const (
	emptyUncleHash   = "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347"
	emptyRootHash    = "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"
	emptyRequestHash = "0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	zeroNonce        = "0x0000000000000000"
	minerAddress     = "0x95222290dd7278aa3ddd389cc1e1d165cc4bafe5"
)

// The contracts that emit the synthetic logs (USDC, WETH, USDT), the event
// signatures they emit (Transfer, Approval, UniswapV2 Swap) and the senders
// of every transaction. Small fixed sets, so log filters select real subsets.
var (
	contractHex = [...]string{
		"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
		"0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2",
		"0xdac17f958d2ee523a2206206994597c13d831ec7",
	}
	topic0Hex = [...]string{
		"0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
		"0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925",
		"0xd78ad95fa46c994b6551d0da85fc275fe613ce37657fb8d5e3d130840159d822",
	}
	senderHex = [...]string{
		"0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f",
		"0x14dc79964da2c08b23698b3d3cc7ca32193d9955",
		"0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f",
		"0xa0ee7a142d267c1f36714e4a8f75612f20a79720",
		"0xbcd4042de499d14e55001ccbb24a551f3b954096",
	}
)

// Contracts returns the addresses that emit the synthetic logs of a node
// with the default Options.Contracts; a node with more also has those of
// [Node.Contracts].
func Contracts() []string { return append([]string(nil), contractHex[:]...) }

// Contracts returns the addresses that emit the node's synthetic logs:
// those of [Contracts], then the made-up ones Options.Contracts asks for.
func (n *Node) Contracts() []string {
	out := make([]string, len(n.tables.contracts))
	for i, a := range n.tables.contracts {
		out[i] = hexutil.Encode(a[:])
	}
	return out
}

// Topic0s returns the event signatures (topic0) of the synthetic logs.
func Topic0s() []string { return append([]string(nil), topic0Hex[:]...) }

// Senders returns the accounts that send the synthetic transactions. A log's
// topic1 is its sender left-padded to 32 bytes.
func Senders() []string { return append([]string(nil), senderHex[:]...) }

// Which contract, event and sender global transaction g uses. Co-prime
// periods make every combination occur.
func (t *tables) contractOf(g uint64) int { return int(g % uint64(len(t.contracts))) }
func (t *tables) topicOf(g uint64) int {
	return int((g / uint64(len(t.contracts))) % uint64(len(topic0Hex)))
}
func senderOf(g uint64) int { return int(g % uint64(len(senderHex))) }

// tables holds the fixed sets decoded once per node.
type tables struct {
	contracts    []common.Address
	topic0s      [len(topic0Hex)]common.Hash
	senders      [len(senderHex)]common.Address
	senderTopics [len(senderHex)]common.Hash
	contractBits []types.Bloom
	topicBits    [len(topic0Hex)]types.Bloom
	senderBits   [len(senderHex)]types.Bloom
}

// newTables decodes the fixed sets, with contracts contracts (at least
// those of contractHex).
func newTables(contracts int) *tables {
	t := new(tables)
	t.contracts = make([]common.Address, max(contracts, len(contractHex)))
	t.contractBits = make([]types.Bloom, len(t.contracts))
	for i := range t.contracts {
		if i < len(contractHex) {
			t.contracts[i] = common.HexToAddress(contractHex[i])
		} else {
			// Made up, and clear of the real ones: 0xc0de…, then i.
			t.contracts[i][0], t.contracts[i][1] = 0xc0, 0xde
			binary.BigEndian.PutUint64(t.contracts[i][12:], uint64(i))
		}
		t.contractBits[i].Add(t.contracts[i].Bytes())
	}
	for i, s := range topic0Hex {
		t.topic0s[i] = common.HexToHash(s)
		t.topicBits[i].Add(t.topic0s[i].Bytes())
	}
	for i, s := range senderHex {
		t.senders[i] = common.HexToAddress(s)
		t.senderTopics[i] = common.BytesToHash(t.senders[i].Bytes())
		t.senderBits[i].Add(t.senderTopics[i].Bytes())
	}
	return t
}

func (t *tables) logBloom(g uint64) types.Bloom {
	var b types.Bloom
	orBloom(&b, &t.contractBits[t.contractOf(g)])
	orBloom(&b, &t.topicBits[t.topicOf(g)])
	orBloom(&b, &t.senderBits[senderOf(g)])
	return b
}

func orBloom(dst, src *types.Bloom) {
	for i := range dst {
		dst[i] |= src[i]
	}
}

type synthBlock struct {
	num, salt    uint64
	chain        uint64 // the chain id its transactions carry
	hash, parent common.Hash
	time         uint64
	baseFee      uint64
	gasUsed      uint64
	bloom        types.Bloom
	txs          []synthTx
}

type synthTx struct {
	idx     int
	g       uint64 // global index: num*txsPerBlock+idx
	hash    common.Hash
	gasUsed uint64
	cumGas  uint64
	bloom   types.Bloom
}

func baseFeeAt(num uint64) uint64 { return baseFeeWei + (num%97)*100_000 }

// block builds visible block num of view v.
func (n *Node) block(v *chainView, num uint64) *synthBlock {
	salt := v.saltAt(num)
	h := n.hasherOf(v)
	b := &synthBlock{
		num:     num,
		salt:    salt,
		chain:   n.chainOf(v),
		hash:    h.block(num, salt),
		time:    n.blockTime(num),
		baseFee: baseFeeAt(num),
	}
	if num == 0 {
		return b // genesis: zero parent, no transactions
	}
	b.parent = h.block(num-1, v.saltAt(num-1))
	b.txs = make([]synthTx, txsPerBlock)
	for i := range b.txs {
		g := num*txsPerBlock + uint64(i)
		tx := &b.txs[i]
		tx.idx = i
		tx.g = g
		tx.hash = h.tx(num, i, salt)
		tx.gasUsed = 46_000 + mix64(g^salt)%20_000
		b.gasUsed += tx.gasUsed
		tx.cumGas = b.gasUsed
		tx.bloom = n.tables.logBloom(g)
		orBloom(&b.bloom, &tx.bloom)
	}
	return b
}

// blockTime is block num's timestamp.
func (n *Node) blockTime(num uint64) uint64 {
	// num*BlockTime in seconds, without overflowing for the large heads
	// tests set.
	hi, lo := bits.Mul64(num, uint64(n.opts.BlockTime))
	if hi >= uint64(time.Second) {
		return math.MaxUint64
	}
	sec, _ := bits.Div64(hi, lo, uint64(time.Second))
	return n.opts.GenesisTime + sec
}

func (b *synthBlock) size() uint64 { return 620 + 180*uint64(len(b.txs)) }

func (b *synthBlock) root(domain uint64) common.Hash { return derive(b.hash, domain) }

// Domains of the values derived from a block or transaction hash.
const (
	rootState = iota + 1
	rootTxs
	rootReceipts
	rootMix
	rootBeacon
	sigR
	sigS
)

// logData is the uint256 amount a transaction moves and logs.
func logData(g, salt uint64) uint64 { return mix64(g^salt^0xda7a) >> 8 }

// appendBlock writes a block as geth's eth_getBlockBy* does: keys sorted
// (geth marshals a map), quantities in minimal hex.
func (n *Node) appendBlock(buf []byte, b *synthBlock, fullTx bool) []byte {
	buf = append(buf, `{"baseFeePerGas":`...)
	buf = appendQuantity(buf, b.baseFee)
	buf = append(buf, `,"blobGasUsed":"0x0","difficulty":"0x0","excessBlobGas":"0x0","extraData":"0x","gasLimit":`...)
	buf = appendQuantity(buf, gasLimit)
	buf = append(buf, `,"gasUsed":`...)
	buf = appendQuantity(buf, b.gasUsed)
	buf = append(buf, `,"hash":`...)
	buf = appendHash(buf, b.hash)
	buf = append(buf, `,"logsBloom":`...)
	buf = appendData(buf, b.bloom[:])
	buf = append(buf, `,"miner":"`+minerAddress+`","mixHash":`...)
	buf = appendHash(buf, b.root(rootMix))
	buf = append(buf, `,"nonce":"`+zeroNonce+`","number":`...)
	buf = appendQuantity(buf, b.num)
	buf = append(buf, `,"parentBeaconBlockRoot":`...)
	buf = appendHash(buf, b.root(rootBeacon))
	buf = append(buf, `,"parentHash":`...)
	buf = appendHash(buf, b.parent)
	buf = append(buf, `,"receiptsRoot":`...)
	buf = b.appendTxRoot(buf, rootReceipts)
	buf = append(buf, `,"requestsHash":"`+emptyRequestHash+`","sha3Uncles":"`+emptyUncleHash+`","size":`...)
	buf = appendQuantity(buf, b.size())
	buf = append(buf, `,"stateRoot":`...)
	buf = appendHash(buf, b.root(rootState))
	buf = append(buf, `,"timestamp":`...)
	buf = appendQuantity(buf, b.time)
	buf = append(buf, `,"transactions":[`...)
	for i := range b.txs {
		if i > 0 {
			buf = append(buf, ',')
		}
		if fullTx {
			buf = n.appendTx(buf, b, &b.txs[i])
		} else {
			buf = appendHash(buf, b.txs[i].hash)
		}
	}
	buf = append(buf, `],"transactionsRoot":`...)
	buf = b.appendTxRoot(buf, rootTxs)
	buf = append(buf, `,"uncles":[],"withdrawals":[],"withdrawalsRoot":"`+emptyRootHash+`"}`...)
	return buf
}

func (b *synthBlock) appendTxRoot(buf []byte, domain uint64) []byte {
	if len(b.txs) == 0 {
		return append(buf, `"`+emptyRootHash+`"`...)
	}
	return appendHash(buf, b.root(domain))
}

// appendHeader writes a header as geth's newHeads does (types.Header's
// generated marshaller: its field order, hash last, unset forks as null).
func (n *Node) appendHeader(buf []byte, b *synthBlock) []byte {
	buf = append(buf, `{"parentHash":`...)
	buf = appendHash(buf, b.parent)
	buf = append(buf, `,"sha3Uncles":"`+emptyUncleHash+`","miner":"`+minerAddress+`","stateRoot":`...)
	buf = appendHash(buf, b.root(rootState))
	buf = append(buf, `,"transactionsRoot":`...)
	buf = b.appendTxRoot(buf, rootTxs)
	buf = append(buf, `,"receiptsRoot":`...)
	buf = b.appendTxRoot(buf, rootReceipts)
	buf = append(buf, `,"logsBloom":`...)
	buf = appendData(buf, b.bloom[:])
	buf = append(buf, `,"difficulty":"0x0","number":`...)
	buf = appendQuantity(buf, b.num)
	buf = append(buf, `,"gasLimit":`...)
	buf = appendQuantity(buf, gasLimit)
	buf = append(buf, `,"gasUsed":`...)
	buf = appendQuantity(buf, b.gasUsed)
	buf = append(buf, `,"timestamp":`...)
	buf = appendQuantity(buf, b.time)
	buf = append(buf, `,"extraData":"0x","mixHash":`...)
	buf = appendHash(buf, b.root(rootMix))
	buf = append(buf, `,"nonce":"`+zeroNonce+`","baseFeePerGas":`...)
	buf = appendQuantity(buf, b.baseFee)
	buf = append(buf, `,"withdrawalsRoot":"`+emptyRootHash+`","blobGasUsed":"0x0","excessBlobGas":"0x0","parentBeaconBlockRoot":`...)
	buf = appendHash(buf, b.root(rootBeacon))
	buf = append(buf, `,"requestsHash":"`+emptyRequestHash+`","blockAccessListHash":null,"slotNumber":null,"hash":`...)
	buf = appendHash(buf, b.hash)
	return append(buf, '}')
}

// appendTx writes a transaction as geth's RPCTransaction (struct order).
func (n *Node) appendTx(buf []byte, b *synthBlock, tx *synthTx) []byte {
	t := n.tables
	buf = append(buf, `{"blockHash":`...)
	buf = appendHash(buf, b.hash)
	buf = append(buf, `,"blockNumber":`...)
	buf = appendQuantity(buf, b.num)
	buf = append(buf, `,"blockTimestamp":`...)
	buf = appendQuantity(buf, b.time)
	buf = append(buf, `,"from":`...)
	buf = appendData(buf, t.senders[senderOf(tx.g)][:])
	buf = append(buf, `,"gas":`...)
	buf = appendQuantity(buf, txGasLimit)
	buf = append(buf, `,"gasPrice":`...)
	buf = appendQuantity(buf, b.baseFee+tipWei)
	buf = append(buf, `,"maxFeePerGas":`...)
	buf = appendQuantity(buf, 2*b.baseFee+tipWei)
	buf = append(buf, `,"maxPriorityFeePerGas":`...)
	buf = appendQuantity(buf, tipWei)
	buf = append(buf, `,"hash":`...)
	buf = appendHash(buf, tx.hash)
	buf = append(buf, `,"input":"0x`+transferSelector...)
	recipient := t.senders[(senderOf(tx.g)+1)%len(t.senders)]
	buf = append(buf, "000000000000000000000000"...)
	buf = hex.AppendEncode(buf, recipient[:])
	buf = appendWord(buf, logData(tx.g, b.salt))
	buf = append(buf, `","nonce":`...)
	buf = appendQuantity(buf, nonceOf(tx.g))
	buf = append(buf, `,"to":`...)
	buf = appendData(buf, t.contracts[t.contractOf(tx.g)][:])
	buf = append(buf, `,"transactionIndex":`...)
	buf = appendQuantity(buf, uint64(tx.idx))
	buf = append(buf, `,"value":"0x0","type":"0x2","accessList":[],"chainId":`...)
	buf = appendQuantity(buf, b.chain)
	parity := tx.g & 1
	buf = append(buf, `,"v":`...)
	buf = appendQuantity(buf, parity)
	buf = append(buf, `,"r":`...)
	buf = appendSig(buf, derive(tx.hash, sigR))
	buf = append(buf, `,"s":`...)
	buf = appendSig(buf, derive(tx.hash, sigS))
	buf = append(buf, `,"yParity":`...)
	buf = appendQuantity(buf, parity)
	return append(buf, '}')
}

// appendSig writes a signature value as geth's hexutil.Big: minimal hex.
// The top bit is cleared so that it stays below secp256k1's N/2 and clients
// that sanity-check signatures accept it.
func appendSig(buf []byte, h common.Hash) []byte {
	h[0] &= 0x7f
	i := 0
	for i < len(h)-1 && h[i] == 0 {
		i++
	}
	buf = append(buf, `"0x`...)
	enc := hex.AppendEncode(nil, h[i:])
	if enc[0] == '0' {
		enc = enc[1:]
	}
	buf = append(buf, enc...)
	return append(buf, '"')
}

// appendReceipt writes a receipt as geth's MarshalReceipt (a map: keys
// sorted).
func (n *Node) appendReceipt(buf []byte, b *synthBlock, tx *synthTx) []byte {
	t := n.tables
	buf = append(buf, `{"blockHash":`...)
	buf = appendHash(buf, b.hash)
	buf = append(buf, `,"blockNumber":`...)
	buf = appendQuantity(buf, b.num)
	buf = append(buf, `,"contractAddress":null,"cumulativeGasUsed":`...)
	buf = appendQuantity(buf, tx.cumGas)
	buf = append(buf, `,"effectiveGasPrice":`...)
	buf = appendQuantity(buf, b.baseFee+tipWei)
	buf = append(buf, `,"from":`...)
	buf = appendData(buf, t.senders[senderOf(tx.g)][:])
	buf = append(buf, `,"gasUsed":`...)
	buf = appendQuantity(buf, tx.gasUsed)
	buf = append(buf, `,"logs":[`...)
	buf = n.appendLog(buf, b, tx, false)
	buf = append(buf, `],"logsBloom":`...)
	buf = appendData(buf, tx.bloom[:])
	buf = append(buf, `,"status":"0x1","to":`...)
	buf = appendData(buf, t.contracts[t.contractOf(tx.g)][:])
	buf = append(buf, `,"transactionHash":`...)
	buf = appendHash(buf, tx.hash)
	buf = append(buf, `,"transactionIndex":`...)
	buf = appendQuantity(buf, uint64(tx.idx))
	buf = append(buf, `,"type":"0x2"}`...)
	return buf
}

// appendLog writes the one log of tx as geth's types.Log (struct order). A
// transaction's log index within the block equals its transaction index.
func (n *Node) appendLog(buf []byte, b *synthBlock, tx *synthTx, removed bool) []byte {
	t := n.tables
	buf = append(buf, `{"address":`...)
	buf = appendData(buf, t.contracts[t.contractOf(tx.g)][:])
	buf = append(buf, `,"topics":[`...)
	buf = appendHash(buf, t.topic0s[t.topicOf(tx.g)])
	buf = append(buf, ',')
	buf = appendHash(buf, t.senderTopics[senderOf(tx.g)])
	buf = append(buf, `],"data":"0x`...)
	buf = appendWord(buf, logData(tx.g, b.salt))
	buf = append(buf, `","blockNumber":`...)
	buf = appendQuantity(buf, b.num)
	buf = append(buf, `,"transactionHash":`...)
	buf = appendHash(buf, tx.hash)
	buf = append(buf, `,"transactionIndex":`...)
	buf = appendQuantity(buf, uint64(tx.idx))
	buf = append(buf, `,"blockHash":`...)
	buf = appendHash(buf, b.hash)
	buf = append(buf, `,"blockTimestamp":`...)
	buf = appendQuantity(buf, b.time)
	buf = append(buf, `,"logIndex":`...)
	buf = appendQuantity(buf, uint64(tx.idx))
	if removed {
		return append(buf, `,"removed":true}`...)
	}
	return append(buf, `,"removed":false}`...)
}

// appendQuantity writes v as a JSON-RPC quantity: "0x" and minimal hex.
func appendQuantity(buf []byte, v uint64) []byte {
	buf = append(buf, `"0x`...)
	buf = strconv.AppendUint(buf, v, 16)
	return append(buf, '"')
}

// appendData writes bytes as a JSON-RPC data string.
func appendData(buf []byte, d []byte) []byte {
	buf = append(buf, `"0x`...)
	buf = hex.AppendEncode(buf, d)
	return append(buf, '"')
}

func appendHash(buf []byte, h common.Hash) []byte { return appendData(buf, h[:]) }

// appendWord writes v as 64 hex digits (a uint256 word), unquoted.
func appendWord(buf []byte, v uint64) []byte {
	var w [32]byte
	binary.BigEndian.PutUint64(w[24:], v)
	return hex.AppendEncode(buf, w[:])
}
