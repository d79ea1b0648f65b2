// Package evm holds the EVM values that several venn packages share: the
// method registry (registry.go: one row per method, with its kind, class,
// block parameter, argument shapes, data kind and metric label), the
// parsed call (Call: the router reads each client call once, sets its
// registry row, and every package below it takes that value), block
// numbers, tags and refs, blocks as a remote sent them and the parts they
// split into (transactions, receipts, logs), and log filters.
// It is the leaf: it imports nothing of the project but its JSON scanner,
// and no go-ethereum (the integrity checks, which need its types, are in
// package integrity).
package evm
