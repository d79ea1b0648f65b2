package evm

import "strings"

// known is the method set that may appear as a metric label. Anything else a
// client sends is labelled "other", so a hostile client cannot grow the
// label space.
var known = func() map[string]struct{} {
	m := make(map[string]struct{})
	for _, s := range []string{
		"eth_accounts", "eth_blobBaseFee", "eth_blockNumber", "eth_call", "eth_callMany",
		"eth_capabilities", "eth_chainId", "eth_coinbase", "eth_config", "eth_createAccessList",
		"eth_estimateGas", "eth_feeHistory", "eth_gasPrice", "eth_getBalance",
		"eth_getBlockByHash", "eth_getBlockByNumber", "eth_getBlockReceipts",
		"eth_getBlockTransactionCountByHash", "eth_getBlockTransactionCountByNumber",
		"eth_getCode", "eth_getFilterChanges", "eth_getFilterLogs", "eth_getLogs",
		"eth_getProof", "eth_getStorageAt", "eth_getStorageValues",
		"eth_getTransactionByBlockHashAndIndex", "eth_getTransactionByBlockNumberAndIndex",
		"eth_getTransactionByHash", "eth_getTransactionCount", "eth_getTransactionReceipt",
		"eth_getUncleByBlockHashAndIndex", "eth_getUncleByBlockNumberAndIndex",
		"eth_getUncleCountByBlockHash", "eth_getUncleCountByBlockNumber", "eth_maxPriorityFeePerGas",
		"eth_mining", "eth_newBlockFilter", "eth_newFilter", "eth_newPendingTransactionFilter",
		"eth_protocolVersion", "eth_sendRawTransaction", "eth_sendTransaction", "eth_sign",
		"eth_signTransaction", "eth_simulateV1", "eth_subscribe", "eth_syncing",
		"eth_uninstallFilter", "eth_unsubscribe", "eth_baseFee", "eth_hashrate",
		"net_listening", "net_peerCount", "net_version", "web3_clientVersion", "web3_sha3",
		"debug_getRawBlock", "debug_getRawHeader", "debug_getRawReceipts",
		"debug_getRawTransaction", "debug_traceBlockByHash", "debug_traceBlockByNumber",
		"debug_traceCall", "debug_traceTransaction", "trace_block", "trace_call",
		"trace_filter", "trace_replayBlockTransactions", "trace_replayTransaction",
		"trace_transaction", "txpool_content", "txpool_contentFrom", "txpool_inspect",
		"txpool_status", "testing_buildBlockV1",
	} {
		m[s] = struct{}{}
	}
	return m
}()

// MethodLabel bounds a method name for use as a metric label.
func MethodLabel(method string) string {
	if _, ok := known[method]; ok {
		return method
	}
	return "other"
}

// BlockParamIndex returns where method carries the block it reads: the
// index of its block number, tag or EIP-1898 object in the positional
// params.
func BlockParamIndex(method string) (int, bool) {
	m, ok := methods[method]
	return int(m.block), ok && m.block >= 0
}

// IsWrite reports methods that change state somewhere: they are never
// retried blindly, hedged or deduplicated. Beyond the known ones, a method
// in a namespace that administers a node, or whose name says it sends,
// signs, submits or sets something (eth_sendRawTransactionSync,
// eth_sendUserOperation, eth_submitWork), is taken for a write: retrying a
// read once too few costs a call, retrying a write once too many can cost
// the client money.
func IsWrite(method string) bool {
	switch method {
	case "eth_sendRawTransaction", "eth_sendTransaction", "eth_sendBundle",
		"eth_sendPrivateTransaction", "eth_sendRawTransactionConditional", "eth_sign",
		"eth_signTransaction", "testing_buildBlockV1":
		return true
	}
	ns, name, ok := strings.Cut(method, "_")
	if !ok {
		return false
	}
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

// IsStateful reports methods whose answer depends on state held by one
// remote (installed filters, the remote's own txpool view): they must not be
// shared between concurrent callers.
func IsStateful(method string) bool {
	switch method {
	case "eth_newFilter", "eth_newBlockFilter", "eth_newPendingTransactionFilter",
		"eth_getFilterChanges", "eth_getFilterLogs", "eth_uninstallFilter",
		"eth_subscribe", "eth_unsubscribe":
		return true
	}
	return false
}

// MatchMethod reports whether method is on list: exactly, or under an entry
// ending in "_" or "*" taken as a prefix ("debug_", "eth_get*"). Every
// method list in venn's config reads this way.
func MatchMethod(list []string, method string) bool {
	for _, p := range list {
		switch {
		case p == method:
			return true
		case strings.HasSuffix(p, "*") && strings.HasPrefix(method, p[:len(p)-1]):
			return true
		case strings.HasSuffix(p, "_") && strings.HasPrefix(method, p):
			return true
		}
	}
	return false
}
