package subcenter

import "github.com/venn-gateway/venn/jrpc"

// LimitOptions are the Options the limits section l sets: subscriptions
// per connection, the notification queue and what logs filters may hold.
// The section names them (max_subscriptions_per_connection,
// subscription_queue, ...) and decides their defaults.
func LimitOptions(l jrpc.Limits) Options {
	return Options{
		MaxPerConn:     l.MaxSubscriptions,
		QueueLen:       l.SubscriptionQueue,
		QueueBytes:     l.SubscriptionQueueBytes,
		MaxAddresses:   l.MaxFilterAddresses,
		MaxTopics:      l.MaxFilterTopics,
		MaxFilterBytes: l.MaxFilterBytes,
	}
}
