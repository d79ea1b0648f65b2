package usage

import (
	"time"
)

// Row is one tenant's usage of one method on one chain on one day.
type Row struct {
	Day      time.Time `json:"day"` // UTC midnight
	Tenant   string    `json:"tenant"`
	Chain    string    `json:"chain"`
	Method   string    `json:"method"`
	Calls    int64     `json:"calls"`
	Credits  int64     `json:"credits"`
	Errors   int64     `json:"errors"`
	BytesOut int64     `json:"bytes_out"`
}

// rowKey identifies a Row.
type rowKey struct {
	day                   int64 // unix day
	tenant, chain, method string
}

type counts struct{ calls, credits, errors, bytesOut int64 }

func (c *counts) add(o counts) {
	c.calls += o.calls
	c.credits += o.credits
	c.errors += o.errors
	c.bytesOut += o.bytesOut
}
