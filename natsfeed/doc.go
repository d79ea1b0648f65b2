// Package natsfeed publishes a chain's head feed to a NATS JetStream
// stream for indexers: every block with its receipts and logs, every reorg
// with the blocks it removed, every gap the feed cannot fill and every
// finality move, in the headstore's order, each message once.
//
// It owns the stream (created or updated at start, a conflicting one
// reported and left alone), the event schema on the wire (wire.go), and
// the publisher that the chain's leader runs while it leads: it resumes
// from the stream's own last message, so a failover, a NATS restart or a
// leader that was away never leaves a duplicate or a silent hole.
//
// It must not touch the headstore's writes or the remotes: it only reads
// the store's events and the replica's window. The NATS connection is the
// nats package's; this package only publishes on it.
package natsfeed
