package subcenter

import "errors"

// Defaults for Limits. Each bounds what one client's subscriptions and
// filters can make venn hold; config overrides them.
const (
	// DefaultMaxSubscriptions bounds one WebSocket connection's
	// subscriptions.
	DefaultMaxSubscriptions = 256
	// DefaultSubscriptionQueue bounds the notifications waiting to be
	// written to one connection: about 20 blocks of an unfiltered logs
	// subscription on mainnet. A client that falls further behind is
	// disconnected.
	DefaultSubscriptionQueue = 10000
	// DefaultSubscriptionQueueBytes bounds the bytes waiting for one
	// connection.
	DefaultSubscriptionQueueBytes int64 = 16 << 20
	// DefaultMaxFilterAddresses bounds the addresses of one logs
	// subscription's filter: geth's --rpc.logquerylimit default.
	DefaultMaxFilterAddresses = 1000
	// DefaultMaxFilterTopics bounds the alternatives at one topic position
	// of a logs filter: geth's limit too.
	DefaultMaxFilterTopics = 1000
	// DefaultMaxFilterBytes bounds the JSON of the logs filters one
	// connection holds (about 23,000 addresses): they stay in memory, at
	// about 2.5 times their JSON size, for as long as the connection.
	DefaultMaxFilterBytes int64 = 1 << 20
)

// Limits are the subscriptions' and filters' limits: the config's limits
// section holds them beside the transport's (jrpc.Limits), under the same
// names. LimitOptions turns them into a Center's Options.
type Limits struct {
	MaxSubscriptions       int   `yaml:"max_subscriptions_per_connection"`
	SubscriptionQueue      int   `yaml:"subscription_queue"`
	SubscriptionQueueBytes int64 `yaml:"subscription_queue_bytes"`
	MaxFilterAddresses     int   `yaml:"max_filter_addresses"`
	MaxFilterTopics        int   `yaml:"max_filter_topics"`
	MaxFilterBytes         int64 `yaml:"max_filter_bytes_per_connection"`
}

// DefaultLimits returns every limit at its default.
func DefaultLimits() Limits {
	return Limits{
		MaxSubscriptions:       DefaultMaxSubscriptions,
		SubscriptionQueue:      DefaultSubscriptionQueue,
		SubscriptionQueueBytes: DefaultSubscriptionQueueBytes,
		MaxFilterAddresses:     DefaultMaxFilterAddresses,
		MaxFilterTopics:        DefaultMaxFilterTopics,
		MaxFilterBytes:         DefaultMaxFilterBytes,
	}
}

// limit is one limit as Validate and WithZeroDefaults see it.
type limit struct {
	name  string // its config name
	value int64
	reset func() // to its default
}

func field[T int | int64](name string, v *T, def T) limit {
	return limit{name: name, value: int64(*v), reset: func() { *v = def }}
}

// fields is the one list of limits: defaults and validation derive from it.
func (l *Limits) fields() []limit {
	d := DefaultLimits()
	return []limit{
		field("max_subscriptions_per_connection", &l.MaxSubscriptions, d.MaxSubscriptions),
		field("subscription_queue", &l.SubscriptionQueue, d.SubscriptionQueue),
		field("subscription_queue_bytes", &l.SubscriptionQueueBytes, d.SubscriptionQueueBytes),
		field("max_filter_addresses", &l.MaxFilterAddresses, d.MaxFilterAddresses),
		field("max_filter_topics", &l.MaxFilterTopics, d.MaxFilterTopics),
		field("max_filter_bytes_per_connection", &l.MaxFilterBytes, d.MaxFilterBytes),
	}
}

// Validate reports every limit that is not usable, each as
// "NAME: must be positive" with NAME its config name.
func (l Limits) Validate() error {
	var errs []error
	for _, f := range l.fields() {
		if f.value <= 0 {
			errs = append(errs, errors.New(f.name+": must be positive"))
		}
	}
	return errors.Join(errs...)
}

// WithZeroDefaults fills the zero (unset) fields with their defaults and
// leaves the rest, so that a negative one is still there to be reported.
func (l Limits) WithZeroDefaults() Limits {
	for _, f := range l.fields() {
		if f.value == 0 {
			f.reset()
		}
	}
	return l
}
