package heads

// The chain's recent canonical hashes, as the pool's tip says them: the
// tip, its parent, and below them the hashes of earlier tips for as long
// as each links to the one above by its parent hash. A reorg that moves
// the tip to another branch cuts what no longer links. The head window's
// freshness is judged by them (remotes.Heads.HashAt): a window whose head is not the
// block the remotes in rotation have at that height holds an orphan.

// chainLen bounds the hashes kept: more than any max_lag a window may
// trail by and still answer.
const chainLen = 64

// Chain is an immutable run of canonical hashes: hashes[i] is block
// top-i's.
type Chain struct {
	top    uint64
	hashes []string
}

// At is block n's hash; ok is false for a number the run does not hold.
func (c *Chain) At(n uint64) (string, bool) {
	if c == nil || n > c.top || c.top-n >= uint64(len(c.hashes)) {
		return "", false
	}
	return c.hashes[c.top-n], true
}

// Extend is the run once t is the tip: t and its parent, and below them
// what c holds if it links to t's parent.
func (c *Chain) Extend(t *Report) *Chain {
	hs := make([]string, 0, chainLen)
	hs = append(hs, t.Hash)
	if t.Number > 0 {
		hs = append(hs, t.Parent)
		if h, ok := c.At(t.Number - 1); ok && h == t.Parent {
			for n := t.Number - 1; n > 0 && len(hs) < chainLen; n-- {
				h, ok := c.At(n - 1)
				if !ok {
					break
				}
				hs = append(hs, h)
			}
		}
	}
	return &Chain{top: t.Number, hashes: hs}
}
