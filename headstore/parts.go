package headstore

import (
	"slices"

	"github.com/venn-gateway/venn/evm"
)

// Canonical returns the window's canonical blocks, ascending, split into
// their parts. The parts are shared and must not be modified.
func (w *Window) Canonical() []*evm.Parts {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return slices.Clone(w.canon)
}
