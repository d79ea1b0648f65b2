package natsfeed

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of a chain's stream.
const (
	// DefaultMaxAge: a day of blocks, for an indexer down overnight.
	DefaultMaxAge = 24 * time.Hour
	// DefaultMaxBytes bounds the stream on the NATS servers' disks. It
	// fits a server's storage as configured out of the box; it holds
	// about 15 minutes of Ethereum mainnet (~1.3 MB a block with
	// receipts), which needs ~10 GB a day: size it with max_bytes.
	DefaultMaxBytes int64 = 1 << 30
	// DefaultDuplicateWindow is how long JetStream remembers message ids:
	// longer than any failover, so an event a new leader publishes again
	// is dropped as a duplicate.
	DefaultDuplicateWindow = 10 * time.Minute
	// DefaultReplicas: one copy, as a single nats-server has.
	DefaultReplicas = 1
)

// Config is a chain's nats section: `nats: {stream: true}` publishes the
// chain's head feed to JetStream while this replica leads the chain.
type Config struct {
	// Stream turns the feed on.
	Stream bool `yaml:"stream"`
	// Name is the JetStream stream; default VENN_<CHAIN>, the chain's
	// name upper-cased (VENN_ETH).
	Name string `yaml:"stream_name"`
	// MaxAge and MaxBytes are the stream's retention: the oldest events
	// go first when either is reached.
	MaxAge   time.Duration `yaml:"max_age"`
	MaxBytes int64         `yaml:"max_bytes"`
	// Replicas is the stream's copies in a NATS cluster.
	Replicas int `yaml:"replicas"`
	// Storage is "file" (the default) or "memory".
	Storage string `yaml:"storage"`
	// DuplicateWindow is how long message ids are remembered.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
}

// WithDefaults fills the zero fields for chain.
func (c Config) WithDefaults(chain string) Config {
	if c.Name == "" {
		c.Name = DefaultStreamName(chain)
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Storage == "" {
		c.Storage = "file"
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	return c
}

// Validate checks the section; each message names its field as the file
// spells it.
func (c Config) Validate() error {
	var errs []error
	if c.Name != "" && !validName(c.Name) {
		errs = append(errs, fmt.Errorf("stream_name: %q: letters, digits, - and _ only", c.Name))
	}
	if c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("max_age: must not be negative"))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max_bytes: must not be negative"))
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas: %d: 1 to 5", c.Replicas))
	}
	switch c.Storage {
	case "", "file", "memory":
	default:
		errs = append(errs, fmt.Errorf("storage: %q: file or memory", c.Storage))
	}
	if c.DuplicateWindow < 0 {
		errs = append(errs, fmt.Errorf("duplicate_window: must not be negative"))
	}
	return errors.Join(errs...)
}

// DefaultStreamName is VENN_ and chain upper-cased, with what a stream
// name cannot hold as _.
func DefaultStreamName(chain string) string {
	return "VENN_" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, chain)
}

func validName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return s != ""
}

// Subjects are a chain's event subjects under prefix.
type Subjects struct{ base string }

// SubjectsFor is chain's subjects: PREFIX.CHAIN.events.*.
func SubjectsFor(prefix, chain string) Subjects {
	return Subjects{base: prefix + "." + chain + ".events"}
}

// All is the wildcard of every event: the stream's subject.
func (s Subjects) All() string { return s.base + ".>" }

// Block is block n's subject: PREFIX.CHAIN.events.block.N. A block has a
// subject of its own so that JetStream finds the stream position of a
// block number (its last message on that subject) without a scan.
func (s Subjects) Block(n uint64) string { return fmt.Sprintf("%s.block.%d", s.base, n) }

// Reorg, Gap and Finality are the other events' subjects.
func (s Subjects) Reorg() string    { return s.base + ".reorg" }
func (s Subjects) Gap() string      { return s.base + ".gap" }
func (s Subjects) Finality() string { return s.base + ".finality" }

// streamConfig is what the stream must be.
func (c Config) streamConfig(subj Subjects) jetstream.StreamConfig {
	storage := jetstream.FileStorage
	if c.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	return jetstream.StreamConfig{
		Name:        c.Name,
		Description: "venn's head feed: blocks, reorgs, gaps and finality, in order",
		Subjects:    []string{subj.All()},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      c.MaxAge,
		MaxBytes:    c.MaxBytes,
		MaxMsgs:     -1,
		MaxMsgSize:  -1,
		Storage:     storage,
		Replicas:    c.Replicas,
		Duplicates:  c.DuplicateWindow,
	}
}
