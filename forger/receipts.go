package forger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/jsonscan"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// Upstream makes one call through a chain's remotes. verify, when not nil,
// judges each remote's answer (remotes.Pool.CallVerified: a failing answer
// is served from another remote); an upstream without integrity checks
// ignores it.
type Upstream func(ctx context.Context, method string, params json.RawMessage,
	verify func(json.RawMessage) integrity.Verdict) (json.RawMessage, error)

// Limits of the per-transaction receipt builder.
const (
	// ReceiptConcurrency bounds the eth_getTransactionReceipt calls in
	// flight for one block.
	ReceiptConcurrency = 8
	// BlockReceiptsRecheck is how long receipts are built per transaction
	// after the remotes said none has eth_getBlockReceipts, before that
	// method is tried again (providers enable methods, remotes change).
	BlockReceiptsRecheck = 10 * time.Minute
)

// Receipts fetches blocks' receipts through the remotes: with
// eth_getBlockReceipts while some remote has it, else with one
// eth_getTransactionReceipt per transaction. It learns which from the
// remotes' "method not found/unsupported" answers and asks again every
// BlockReceiptsRecheck. Safe for concurrent use.
type Receipts struct {
	up  Upstream
	log *slog.Logger
	now func() time.Time

	// unsupportedAt is when the remotes last said none has
	// eth_getBlockReceipts (Unix nanoseconds; 0: they have not).
	unsupportedAt atomic.Int64
}

// NewReceipts returns a receipts fetcher over up; log may be nil.
func NewReceipts(up Upstream, log *slog.Logger) *Receipts {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Receipts{up: up, log: log, now: time.Now}
}

// blockMethod reports whether eth_getBlockReceipts is worth a call: no
// remote said it lacks it, or that was BlockReceiptsRecheck ago.
func (r *Receipts) blockMethod() bool {
	at := r.unsupportedAt.Load()
	return at == 0 || r.now().Sub(time.Unix(0, at)) > BlockReceiptsRecheck
}

// learn records an eth_getBlockReceipts failure; it reports whether the
// failure says no remote has the method.
func (r *Receipts) learn(err error) bool {
	if !Unsupported("eth_getBlockReceipts", err) {
		return false
	}
	if r.unsupportedAt.Swap(r.now().UnixNano()) == 0 {
		r.log.Info("no remote has eth_getBlockReceipts: building receipts per transaction")
	}
	return true
}

// emptyList is the receipts of a block without transactions: no call.
var emptyList = json.RawMessage("[]")

// OfBlock fetches the receipts of the block hash, whose transactions are
// txs, by its hash, so that they are that block's and not a sibling's. blk
// is the block as verified (nil: not verified): eth_getBlockReceipts is
// checked against it, one remote's answer at a time; receipts fetched one
// by one only against themselves (their root would blame no remote in
// particular).
func (r *Receipts) OfBlock(ctx context.Context, hash string, txs []string, blk *integrity.BlockInfo) (json.RawMessage, error) {
	if len(txs) == 0 {
		return emptyList, nil
	}
	if r.blockMethod() {
		want := evm.BlockRef{Kind: evm.RefHash, Hash: hash}
		res, err := r.up(ctx, "eth_getBlockReceipts", json.RawMessage(`["`+hash+`"]`), func(res json.RawMessage) integrity.Verdict {
			return integrity.VerifyReceipts(res, want, func(h common.Hash) *integrity.BlockInfo {
				if blk != nil && h == blk.Hash {
					return blk
				}
				return nil
			})
		})
		if err == nil {
			if string(res) == "null" {
				return nil, errors.New("no remote has the block's receipts yet")
			}
			return res, nil
		}
		if !r.learn(err) {
			return nil, err
		}
	}
	return r.perTransaction(ctx, txs)
}

// perTransaction fetches one receipt per transaction, at most
// ReceiptConcurrency at once, and joins them in order: geth marshals a
// receipt the same way for eth_getTransactionReceipt and
// eth_getBlockReceipts, so the array is byte for byte the node's.
func (r *Receipts) perTransaction(ctx context.Context, txs []string) (json.RawMessage, error) {
	parts := make([]json.RawMessage, len(txs))
	notes := jrpc.NewBranches(ctx, len(txs)) // each part notes its remote
	defer notes.Merge(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ReceiptConcurrency)
	for i, tx := range txs {
		g.Go(func() error {
			res, err := r.up(notes.Context(gctx, i), "eth_getTransactionReceipt", json.RawMessage(`["`+tx+`"]`), integrity.VerifyReceipt)
			if err == nil && string(res) == "null" {
				err = fmt.Errorf("no remote has the receipt of %s yet", tx)
			}
			parts[i] = res
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return jsonscan.JoinValues(parts), nil
}

// Unsupported reports an error saying no remote has method ("method not
// found", "not supported" and the like, as verdict.Classify reads them).
func Unsupported(method string, err error) bool {
	return err != nil && verdict.Classify(method, err).Reason == verdict.ReasonMethodUnsupported
}
