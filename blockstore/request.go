package blockstore

import (
	"github.com/venn-gateway/venn/evm"
)

// answerable reports whether the store may answer c: a call it knows, read
// as geth reads it (evm.Call.Exact), that names its block by number or
// hash. Tags go to the node (the store does not know the head), as does a
// log range that is not explicit numbers, or that runs backwards (geth
// refuses it).
func answerable(c *evm.Call) bool {
	if !c.Exact {
		return false
	}
	switch c.Kind {
	case evm.KindBlock, evm.KindBlockReceipts, evm.KindTxByIndex, evm.KindTxCount, evm.KindUncleCount:
		return c.Ref.Kind == evm.RefNumber || c.Ref.Kind == evm.RefHash
	case evm.KindTx, evm.KindReceipt:
		return true
	case evm.KindLogs:
		f := &c.Filter
		return f.ByHash || f.From.Kind == evm.RefNumber && f.To.Kind == evm.RefNumber && f.From.Number <= f.To.Number
	}
	return false
}
