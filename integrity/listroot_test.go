package integrity

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
)

type blobs [][]byte

func (b blobs) Len() int                           { return len(b) }
func (b blobs) EncodeIndex(i int, w *bytes.Buffer) { w.Write(b[i]) }

// randomList is n values of 1 to 120 random bytes, the same for every run.
func randomList(n int) blobs {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	b := make(blobs, n)
	for i := range b {
		b[i] = make([]byte, 1+r.IntN(120))
		for j := range b[i] {
			b[i][j] = byte(r.Uint32())
		}
	}
	return b
}

// TestListRoot holds our list hasher to go-ethereum's StackTrie: the roots
// below are types.DeriveSha(randomList(n), trie.NewStackTrie(nil)),
// computed once with go-ethereum v1.17.10 (package trie itself is not
// imported: it needs modules venn does not have). The sizes cross every
// shape: a lone leaf, branches, the 0x7f/0x80 key boundary where RLP keys
// grow a byte, and deep tries.
func TestListRoot(t *testing.T) {
	tests := []struct {
		give int
		want string
	}{
		{give: 0, want: types.EmptyRootHash.Hex()},
		{give: 1, want: "0x2afd6826ad80b017510881fcd8dd8dcee0fded23f586f20189ee10462c381b92"},
		{give: 2, want: "0xbb0ea57ffb7cc33429690bc7a6d5b22e11daa409b40446b945c2054259380373"},
		{give: 3, want: "0x794597c712a73b6983c8a2fdf4fd42c574fe8dce12befd7fe1e8411257e97d7a"},
		{give: 15, want: "0xe74f8cc80d55113629078874aecff701d486fd218395c354b19569e1edc3482c"},
		{give: 16, want: "0x4b23410b65fb92abfefefc6435d1b8c09fbc9a6be38219b4d866fa5727472021"},
		{give: 17, want: "0xce5c6a11294792a7aa6e8650f84a1ea9a62e0803c4ba4fd68866247bb7902e2a"},
		{give: 127, want: "0x581effaf9c4c9db8795bca5b5972f067cc69aea8144079218874899456fd5289"},
		{give: 128, want: "0xc9c90cdd03995fba3f8cb633fea43e4b7c4f9f48facc53f90c559b9e13623da1"},
		{give: 129, want: "0xb2747c24173e114a765c46a1ce26ef9a0fff6f5e257fa2f0e4f682d019451576"},
		{give: 255, want: "0xa5130725988668ae6eaf36c1b809fdab7319bc6f1d1e16798ea84bd8aaf1df9c"},
		{give: 256, want: "0xa0c59ad2813665bb3e8f0593a3b4440d3d94440fe13ab6572fedb66cca22653b"},
		{give: 257, want: "0x982c1ae978e92c5db035e4d3ee2e147a970a777333a3ca765889c037aff5c84c"},
		{give: 1000, want: "0xdcbed08d47cbdbe32c4c396c7b81f83334fe5ca49dd81b95f9525f41d3c1d70a"},
		{give: 4097, want: "0x6662f1cb55b9b33fe285c6f9ea12b5b70e13f9f82869c356c09fb4eb3465558f"},
	}
	for _, tt := range tests {
		if got := deriveSha(randomList(tt.give)); got.Hex() != tt.want {
			t.Errorf("%d items: root %s, want %s", tt.give, got.Hex(), tt.want)
		}
	}
}

func BenchmarkListRoot(b *testing.B) {
	list := randomList(500)
	for b.Loop() {
		deriveSha(list)
	}
}
