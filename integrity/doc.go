// Package integrity checks what a remote sent against itself: a block's
// hash against its header fields, its transactionsRoot against its
// transactions (and each transaction's hash against its fields), its
// withdrawalsRoot against its withdrawals, and a block's receipts against
// its receiptsRoot and logsBloom. It rebuilds the consensus objects with
// go-ethereum's types and hashes them; nothing the remote computed is
// taken on trust. The pool (remotes), the stalker and the forger run these
// checks on what they fetch, so evm, the values everyone shares, carries no
// go-ethereum.
//
// A check that can't be run is skipped, never failed: a transaction or
// receipt type go-ethereum can't encode (an L2's deposit), a header or
// transaction member it doesn't know (an L2's, or a fork newer than
// go-ethereum v1.17.10), a value that doesn't decode. A false failure would
// cast an honest remote as a liar; a skip is only counted.
package integrity
