package headstore

// Parts is a block split into what is served separately: the block in
// both of geth's forms, and each transaction, receipt and log, every one a
// sub-slice of the bytes the remote sent. The history store files blocks
// by these parts; subscribers get the logs.
type Parts struct {
	*Block
	Time     uint64   // the block's timestamp
	HashOnly []byte   // Raw with transactions as hashes (eth_getBlockBy*(…, false))
	Txs      [][]byte // transaction objects, by index
	TxHashes []string // lowercase, by index
	Receipts [][]byte // receipt objects, by index
	Logs     []Log    // every log of the block, in log index order
}

// Split checks b the way ParseBlock does and splits it into its parts.
func Split(b *Block) (*Parts, error) {
	e, err := index(b)
	if err != nil {
		return nil, err
	}
	return e.parts(), nil
}

func (e *entry) parts() *Parts {
	return &Parts{Block: e.Block, Time: e.time, HashOnly: e.hashOnly, Txs: e.txs,
		TxHashes: e.txHashes, Receipts: e.receipts, Logs: e.logs}
}

// Canonical returns the window's canonical blocks, ascending, split into
// their parts. The parts are shared and must not be modified.
func (w *Window) Canonical() []*Parts {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]*Parts, len(w.canon))
	for i, e := range w.canon {
		out[i] = e.parts()
	}
	return out
}
