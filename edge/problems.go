package edge

import (
	"fmt"
)

// problems collects validation errors, each prefixed with its field path.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, fmt.Errorf(path+": "+format, args...))
}
