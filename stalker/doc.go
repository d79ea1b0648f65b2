// Package stalker is the leader's loop per chain: it follows the head through
// the remotes, fetches each block and its receipts, walks back on reorgs and
// publishes to the headstore. Leader election lives here too.
package stalker
