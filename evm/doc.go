// Package evm holds the EVM values that several venn packages share: the
// parsed call (Call: the router reads each client call once, with the one
// method table, and every package below it takes that value), block
// numbers, tags and refs, the known JSON-RPC method set and where each
// method carries its block parameter, blocks as a remote sent them and the
// parts they split into (transactions, receipts, logs), and log filters.
// It is the leaf: it imports nothing of the project but its JSON scanner,
// and no go-ethereum (the integrity checks, which need its types, are in
// package integrity).
package evm
