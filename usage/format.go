package usage

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Config is the usage section: how the replica writes usage to Postgres
// (postgres.url); without Postgres usage is kept only as metrics.
type Config struct {
	// FlushInterval is how often the rows are written (default 10s): a
	// replica that dies loses at most this much usage.
	FlushInterval time.Duration `yaml:"flush_interval"`
	// MaxRows bounds the rows held while Postgres cannot take them
	// (default 200000); calls beyond are dropped and counted.
	MaxRows int `yaml:"max_rows"`
}

// WithDefaults returns c with its zero fields at their defaults.
func (c Config) WithDefaults() Config {
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.MaxRows == 0 {
		c.MaxRows = DefaultMaxRows
	}
	return c
}

// Validate names the field of each problem.
func (c Config) Validate() error {
	if c.FlushInterval < 0 {
		return fmt.Errorf("usage.flush_interval: must be positive")
	}
	if c.MaxRows < 0 {
		return fmt.Errorf("usage.max_rows: must be positive")
	}
	return nil
}

// Formats Write writes.
const (
	FormatCSV  = "csv"
	FormatJSON = "json"
)

// csvHeader is the first line of a CSV.
var csvHeader = []string{"day", "tenant", "chain", "method", "calls", "credits", "errors", "bytes_out"}

// Write writes rows as CSV (a header line, then one line per row) or as a
// JSON array.
func Write(w io.Writer, rows []Row, format string) error {
	switch format {
	case FormatJSON:
		if rows == nil {
			rows = []Row{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case FormatCSV, "":
		cw := csv.NewWriter(w)
		_ = cw.Write(csvHeader)
		for _, r := range rows {
			_ = cw.Write([]string{r.Day.Format(time.DateOnly), r.Tenant, r.Chain, r.Method,
				strconv.FormatInt(r.Calls, 10), strconv.FormatInt(r.Credits, 10),
				strconv.FormatInt(r.Errors, 10), strconv.FormatInt(r.BytesOut, 10)})
		}
		cw.Flush()
		return cw.Error()
	}
	return fmt.Errorf("format must be csv or json, not %q", format)
}

// MarshalJSON writes Day as a date.
func (r Row) MarshalJSON() ([]byte, error) {
	type row Row
	return json.Marshal(struct {
		Day string `json:"day"`
		row
	}{Day: r.Day.Format(time.DateOnly), row: row(r)})
}

// ParseDay reads a YYYY-MM-DD date, UTC.
func ParseDay(s string) (time.Time, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date (YYYY-MM-DD)", s)
	}
	return t, nil
}
