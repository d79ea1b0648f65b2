package reqlog

import (
	"cmp"
	"errors"
	"fmt"
)

// Defaults of the request log.
const (
	// DefaultOutput is where lines go unless a file is named.
	DefaultOutput = "stderr"
	// DefaultSample logs every call.
	DefaultSample = 1.0
	// DefaultParamsMaxBytes caps the params logged of one call: enough for
	// most reads, not for a contract's calldata.
	DefaultParamsMaxBytes = 256
	// DefaultBuffer is the lines waiting to be written: a few
	// milliseconds of a busy replica. When the output is slower, lines
	// are dropped (and counted), never waited for.
	DefaultBuffer = 4096
	// maxBuffer bounds Buffer: each waiting line holds a few hundred bytes.
	maxBuffer = 1 << 20
)

// Config is the request_log section: one JSON line per client call.
type Config struct {
	// Enabled turns the log on; off by default.
	Enabled bool `yaml:"enabled"`
	// Output is stderr, stdout, or a file path, appended to (created
	// 0640). The file is never reopened: rotate it with logrotate's
	// copytruncate.
	Output string `yaml:"output"`
	// Sample is the share of calls logged, in (0, 1]; 0 takes the
	// default, 1: every call.
	Sample float64 `yaml:"sample"`
	// Params logs each call's params, cut at ParamsMaxBytes; off by
	// default (they can be a client's business). A raw transaction is
	// logged as its hash only, never its bytes.
	Params         bool `yaml:"params"`
	ParamsMaxBytes int  `yaml:"params_max_bytes"`
	// Buffer is how many lines may wait for the output.
	Buffer int `yaml:"buffer"`
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	c.Output = cmp.Or(c.Output, DefaultOutput)
	c.Sample = cmp.Or(c.Sample, DefaultSample)
	c.ParamsMaxBytes = cmp.Or(c.ParamsMaxBytes, DefaultParamsMaxBytes)
	c.Buffer = cmp.Or(c.Buffer, DefaultBuffer)
	return c
}

// Validate checks a defaulted config; each message names its field.
func (c Config) Validate() error {
	var errs []error
	if c.Sample <= 0 || c.Sample > 1 {
		errs = append(errs, fmt.Errorf("sample: must be in (0, 1], not %v", c.Sample))
	}
	if c.ParamsMaxBytes < 0 {
		errs = append(errs, errors.New("params_max_bytes: must be positive"))
	}
	if c.Buffer < 0 || c.Buffer > maxBuffer {
		errs = append(errs, fmt.Errorf("buffer: must be in [1, %d]", maxBuffer))
	}
	return errors.Join(errs...)
}
