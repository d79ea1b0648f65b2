// Package fielderr collects the problems a config section's Validate
// finds, each prefixed with the field it names as the file spells it
// (rate_limit.rps, consensus[1].agree), and joins them into one error. It
// is the one way the remotes' settings, budgets and vote rules word their
// problems; it knows no setting.
package fielderr

import (
	"errors"
	"fmt"
)

// List collects validation errors, each prefixed with its field.
type List []error

// Add adds a problem of field.
func (l *List) Add(field, format string, args ...any) {
	*l = append(*l, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// Negative adds "must be positive" for field when bad.
func (l *List) Negative(field string, bad bool) {
	if bad {
		l.Add(field, "must be positive")
	}
}

// Err is every problem joined, nil when there is none.
func (l List) Err() error { return errors.Join(l...) }

// Under adds the problems another Validate found, each field prefixed
// with prefix ("" adds them as they are).
func (l *List) Under(prefix string, err error) {
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if prefix != "" {
			e = fmt.Errorf("%s.%w", prefix, e)
		}
		*l = append(*l, e)
	}
}
