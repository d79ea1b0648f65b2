// Package evm holds the EVM value types that several venn packages share:
// block numbers and tags, the known JSON-RPC method set, and where each method
// carries its block parameter. It imports nothing of the project.
package evm
