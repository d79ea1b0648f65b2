// Package evm holds the EVM value types that several venn packages share:
// the parsed call (Call: the router reads each client call once, with the
// one method table, and every part of venn below it takes that value),
// block numbers and tags, the known JSON-RPC method set, and where each method
// carries its block parameter; and the integrity checks of blocks and
// receipts a remote sends (verify.go), which rebuild them with go-ethereum's
// types. It imports nothing of the project but its JSON scanner.
package evm
