// Package forger answers what venn builds from other calls instead of
// forwarding: a block's receipts assembled from one eth_getTransactionReceipt
// per transaction where no remote has eth_getBlockReceipts, blocks fetched
// whole (with receipts) for the history store, and methods whose answer is a
// part of a block venn already holds (headers, uncles by index).
//
// It owns no state beyond what it learned of the remotes (whether any has
// eth_getBlockReceipts) and stores nothing: the router and the stalker hand
// it their upstream and their block sources.
package forger
