// Package evm holds the EVM value types that several venn packages share:
// block numbers and tags, the known JSON-RPC method set, and where each method
// carries its block parameter; and the integrity checks of blocks and
// receipts a remote sends (verify.go), which rebuild them with go-ethereum's
// types. It imports nothing of the project but its JSON scanner.
package evm
