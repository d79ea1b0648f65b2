package headstore_test

import (
	"testing"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/headstore/storetest"
)

// TestStoreContract holds the memory store to every Store's contract; the
// Redis store runs it in package redisstore.
func TestStoreContract(t *testing.T) {
	storetest.Contract(t, func(_ *testing.T, window int) headstore.Store { return headstore.NewMemory(window) })
}
