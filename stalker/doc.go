// Package stalker is the leader's loop per chain: it follows the head through
// the remotes, fetches each block and its receipts, walks back on reorgs and
// publishes to the headstore, and files the settled blocks it published in
// the history store (archive.go). Leader election lives here too, and the
// sharing of the remotes' heads (heads.go): the leader publishes them, the
// other replicas route on them.
package stalker
