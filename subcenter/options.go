package subcenter

// LimitOptions are the Options the limits l set: subscriptions per
// connection, the notification queue and what logs filters may hold.
func LimitOptions(l Limits) Options {
	return Options{
		MaxPerConn:     l.MaxSubscriptions,
		QueueLen:       l.SubscriptionQueue,
		QueueBytes:     l.SubscriptionQueueBytes,
		MaxAddresses:   l.MaxFilterAddresses,
		MaxTopics:      l.MaxFilterTopics,
		MaxFilterBytes: l.MaxFilterBytes,
	}
}

// withDefaults is o with zero fields at their defaults.
func (o Options) withDefaults() Options {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&o.MaxPerConn, DefaultMaxSubscriptions)
	set(&o.QueueLen, DefaultSubscriptionQueue)
	set(&o.MaxAddresses, DefaultMaxFilterAddresses)
	set(&o.MaxTopics, DefaultMaxFilterTopics)
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultSubscriptionQueueBytes
	}
	if o.MaxFilterBytes <= 0 {
		o.MaxFilterBytes = DefaultMaxFilterBytes
	}
	if o.RelayStartWait <= 0 {
		o.RelayStartWait = DefaultRelayStartWait
	}
	return o
}

// options are the limits in force.
func (c *Center) options() *Options { return c.opts.Load() }

// SetLimits puts the limits of o (LimitOptions'; zero fields at their
// defaults) in force on a running Center, for a configuration reload; its
// RelayStartWait stays. Subscriptions already open stay, even over a
// lowered max_subscriptions_per_connection or filter budget: the limits
// judge each new subscription, and each notification queued from then on
// (a connection whose queue is over a lowered subscription_queue is
// dropped as too slow at its next one). Safe for concurrent use.
func (c *Center) SetLimits(o Options) {
	o.RelayStartWait = c.options().RelayStartWait
	o = o.withDefaults()
	c.opts.Store(&o)
}
