package app

import (
	"fmt"
)

// problems collects validation errors, each prefixed with its field path.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// under adds the problems a package's Validate found, each field path
// prefixed with path.
func (p *problems) under(path string, err error) {
	for _, e := range unwrapJoined(err) {
		*p = append(*p, fmt.Errorf("%s.%w", path, e))
	}
}

func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}
