// Package fakenode is an in-process fake EVM JSON-RPC node for venn's tests
// and benchmarks. It speaks geth's wire (HTTP POST, single and batch, and
// WebSocket on the same "/" path) with geth v1.17 result shapes and error
// texts for the methods it serves, over a synthetic chain that needs no
// state: every block, transaction, receipt and log is a pure function of the
// block number, a fork salt and the chain id. Two nodes built with the same
// ChainID therefore serve the same chain, as two providers of one network do.
//
// It owns nothing of venn and imports only jrpc (for the error type). It
// must never be used outside tests and benchmarks.
//
// # The chain
//
// Blocks 0..Head exist. Block n has timestamp GenesisTime+n*BlockTime
// (whole seconds; 12 s by default), hash
// keccak256(seed, salt, n) (the last 8 bytes carry an invertible mix of n so
// that lookups by hash need no index), parentHash = hash(n-1), and two type-2
// transactions (genesis has none). Each transaction emits one log from one of
// three contracts ([Contracts]; Options.Contracts asks for more) with topic0
// from a fixed set ([Topic0s]) and topic1 the padded sender, so address and
// topic filters select real subsets.
// Hashes are synthetic: they are not the keccak of the RLP encoding, and a
// client recomputing them will disagree. Blocks orphaned by a fork are not
// served by hash any more, as on a node that never saw the side chain.
//
// Mine, SetHead, SetFork and Reorg move the chain; each change pushes
// newHeads (one header per new block, in order) and logs notifications
// (removed:true for the dropped blocks first, ascending, as geth does) to
// WebSocket subscribers. A change that makes more than MaxHeadsPerChange
// blocks appear notifies only the last MaxHeadsPerChange of them.
//
// # Shapes
//
// NewShapeChain puts a chain of real-sized blocks on a node (shape.go):
// go-ethereum blocks of signed transactions with receipts and logs, their
// hashes and roots real, released one per block time on a wall-clock
// schedule (the Shapes: an L2, Base-like, BSC-like, mainnet). It answers
// the block methods through the node's hook and sends each header to the
// node's newHeads subscribers with PushHead; the rest is the synthetic
// chain's.
//
// # Faults
//
// Every fault is switchable at run time and safe for concurrent use. Unless
// a fault says otherwise it applies to HTTP requests and to WebSocket
// messages, once per request or message (not once per batch item);
// WebSocket handshakes are never delayed, and subscription notifications
// are never delayed or corrupted. When several are on, the first in this
// list wins. Reset turns them all off.
//
//   - SetDown(true): like a stopped process. The listener is closed (new
//     connections are refused) and every open connection, HTTP or
//     WebSocket, is closed. SetDown(false) listens again on the same port.
//     Only for nodes started with Start; a mounted Handler is unaffected.
//   - SetLatency(d): every answer (including the faulty ones below) waits d
//     first. The wait ends early if the client goes away or the node closes.
//     Options.Sleep replaces the wait (a test's clock).
//   - SetSlowTail(fraction, d): every round(1/fraction)-th request waits d
//     more, counted across the node, so the tail is deterministic.
//   - SetDrop(true): the connection is closed without an answer (HTTP: the
//     TCP connection is hijacked and closed; WebSocket: the connection is
//     closed).
//   - SetFailStatus(status) / SetFailBody(status, body): every HTTP request,
//     including WebSocket handshakes, gets that status and a small body, as
//     from a proxy in front of the node. Open WebSocket connections keep
//     working. 0 turns it off.
//   - SetGarbage(true): 200 OK with a body (or WebSocket message) that is
//     not JSON.
//   - SetRPCError(code, msg) / SetRPCErrorData: every call is answered
//     with this JSON-RPC error (each item of a batch). Code 0 turns it off.
//   - SetEcho(fn): every call is answered with the error fn makes from the
//     request that carried it (its URL and headers; for WebSocket, the
//     handshake's), as from a provider that repeats the caller's key.
//   - SetHook(fn): fn sees every call first and may answer it (handled);
//     it must be safe for concurrent use.
//   - SetChainID(id): eth_chainId and net_version report id.
//   - SwitchChain(id): the node serves another chain from now on, the one a
//     node built with ChainID id serves (its chain id, hashes, transactions
//     and logs), as an endpoint re-pointed at another network does.
//     SwitchChain(0) goes back. Unlike the other faults it is part of the
//     chain, so Reset leaves it.
//   - SetLag(k): the node serves only up to Head()-k: eth_blockNumber,
//     blocks and receipts above it are null, state calls above it fail
//     with -32000 "header not found", eth_getLogs beyond it fails with
//     geth 1.17's -32602 "block range extends beyond current head block",
//     and newHeads stop there. Lowering the lag notifies the blocks that
//     become visible.
//   - SetBogusHead(h): the node claims head h (eth_blockNumber,
//     eth_getBlockByNumber("latest"), newHeads headers) with an unknown
//     parent and the real head's timestamp, and serves nothing above its
//     real head: a remote that lies about its head.
//   - SetMaxLogsRange(k): eth_getLogs over more than k blocks (to-from+1)
//     fails with Besu's -32005 "requested range exceeds maximum RPC range
//     limit". 0 turns it off.
//   - SetStateWindow(k): a pruned node keeping the state of its last k
//     blocks: state calls more than k below the visible head fail with
//     geth's -32000 "missing trie node"; blocks, receipts and logs stay.
//     0 turns it off.
//   - SetMaxLogResults(k): eth_getLogs matching more than k logs fails
//     with -32005 "query returned more than k results", even within one
//     block. 0 turns it off.
//   - DropFilters(): every eth_newPendingTransactionFilter filter is
//     forgotten, as by a restarted node; the next eth_getFilterChanges on
//     one gets geth's -32000 "filter not found". Reset leaves filters be.
//
// eth_sendRawTransaction goes to newPendingTransactions subscribers and to
// every pending-transaction filter (eth_newPendingTransactionFilter, polled
// with eth_getFilterChanges, removed with eth_uninstallFilter; a filter
// asked for full transactions answers hashes too). Use SetHook to take
// these methods away from a node.
//
// Calls, TotalCalls and ResetCalls count the calls that reached the node
// (every item of a batch, whatever the answer; malformed messages count under
// method ""); CallsAt counts those of a method whose first parameter is a
// name ("latest", "newHeads"). Calls refused by SetDown never reach it.
//
// # Limits
//
// As geth: request bodies up to 5 MiB, batches up to 1000 calls, WebSocket
// messages up to 32 MiB. eth_getLogs answers at most MaxLogResults logs
// (beyond that -32005 "query returned more than 10000 results", Infura's
// text), which only guards tests against runaway queries. A WebSocket
// client that does not read is dropped once SendQueue messages are queued
// for it; it never stalls the node.
package fakenode
