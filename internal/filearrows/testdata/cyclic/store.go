// Package cyclic is filearrows' test bed: store.go and double.go use each
// other through clamp, a helper that belongs with its one user; report.go
// only uses store.go.
package cyclic

type Store struct{ n int }

func (s *Store) Put(n int) { s.n = double(n) }

func clamp(n int) int {
	if n < 0 {
		return 0
	}
	return n
}
