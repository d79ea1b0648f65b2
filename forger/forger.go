package forger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/jsonscan"
)

// buildAttempts bounds the tries to assemble one block's receipts when
// they disagree with the block (it was reorged between the calls).
const buildAttempts = 3

// Forger builds a chain's answers from other calls through its remotes.
// Safe for concurrent use.
type Forger struct {
	calls    Calls
	up       Upstream // calls, for the calls the forger builds
	receipts *Receipts
}

// Calls is the chain's remotes as the forger uses them (remotes.Pool, or
// remotes.VerifiedClient over it): one call, parsed once, answered without
// its params being read again. The router hands the forger its own.
type Calls interface {
	ServeCall(ctx context.Context, c evm.Call) (json.RawMessage, error)
}

// New returns a forger over calls; log may be nil. It does no I/O.
func New(calls Calls, log *slog.Logger) *Forger {
	up := func(ctx context.Context, method string, params json.RawMessage, _ func(json.RawMessage) integrity.Verdict) (json.RawMessage, error) {
		// verify is not applied: remotes that check answers
		// (remotes.VerifiedClient) do so on their own.
		return calls.ServeCall(ctx, evm.ParseCall(method, params))
	}
	return &Forger{calls: calls, up: up, receipts: NewReceipts(up, log)}
}

// forward sends the client's call c on as the router parsed it.
func (f *Forger) forward(ctx context.Context, c *evm.Call) (json.RawMessage, error) {
	return f.calls.ServeCall(ctx, *c)
}

// Receipts is the forger's receipts fetcher.
func (f *Forger) Receipts() *Receipts { return f.receipts }

// resultNull is geth's answer for a block it does not have.
var resultNull = json.RawMessage("null")

// errCannotBuild: the params are of a shape the builder leaves to the node.
var errCannotBuild = errors.New("cannot build")

// BlockReceipts answers an eth_getBlockReceipts call through the remotes:
// forwarded while some remote has the method, else assembled from the
// block's transaction hashes and one eth_getTransactionReceipt each, which
// is byte for byte what geth answers (null for a block it does not have).
// built reports an assembled answer.
func (f *Forger) BlockReceipts(ctx context.Context, c *evm.Call) (res json.RawMessage, built bool, err error) {
	r := f.receipts
	if r.blockMethod() {
		res, err := f.forward(ctx, c)
		if err == nil || !r.learn(err) {
			return res, false, err
		}
	}
	res, err = f.buildReceipts(ctx, c)
	if errors.Is(err, errCannotBuild) {
		// pending, malformed params, …: the remotes' own answer.
		res, err = f.forward(ctx, c)
		return res, false, err
	}
	return res, err == nil, err
}

// buildReceipts assembles eth_getBlockReceipts from the block the call
// names (evm.Call.BlockFetch) and its receipts.
func (f *Forger) buildReceipts(ctx context.Context, c *evm.Call) (json.RawMessage, error) {
	method, ref, canonical, ok := c.BlockFetch()
	if !ok {
		return nil, errCannotBuild
	}
	var lastErr error
	for range buildAttempts {
		raw, err := f.up(ctx, method, json.RawMessage("["+string(ref)+",false]"), nil)
		if err != nil {
			return nil, err
		}
		if string(raw) == "null" {
			return resultNull, nil
		}
		n, hash, txs, err := blockTxs(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if canonical {
			if err := f.checkCanonical(ctx, n, hash); err != nil {
				return nil, err
			}
		}
		if len(txs) == 0 {
			return emptyList, nil
		}
		res, err := f.receipts.perTransaction(ctx, txs)
		if err == nil {
			if err = ofBlock(res, hash); err == nil {
				return res, nil
			}
		}
		if ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("receipts of block: %w", lastErr)
}

// notCanonicalError is geth's answer for an EIP-1898 hash with
// requireCanonical whose block is not on the canonical chain: its plain
// -32000, mapped to the wire by jrpc.ToWire.
type notCanonicalError struct{}

func (notCanonicalError) Error() string  { return "hash is not currently canonical" }
func (notCanonicalError) ErrorCode() int { return -32000 }

var errNotCanonical error = notCanonicalError{}

// checkCanonical asks whether hash is the canonical block at n.
func (f *Forger) checkCanonical(ctx context.Context, n uint64, hash string) error {
	raw, err := f.up(ctx, "eth_getBlockByNumber", json.RawMessage(`["`+evm.Quantity(n)+`",false]`), nil)
	if err != nil {
		return err
	}
	if _, h, _, err := blockTxs(raw); err != nil || h != hash {
		return errNotCanonical
	}
	return nil
}

// blockTxs reads a block's number, hash (lowercase) and transaction hashes
// (lowercase; the block may carry hashes or full transactions).
func blockTxs(raw []byte) (n uint64, hash string, txs []string, err error) {
	num := jsonscan.Member(raw, "number")
	s, ok := str(num)
	if !ok {
		return 0, "", nil, errors.New("block without a number")
	}
	if n, err = evm.ParseQuantity(s); err != nil {
		return 0, "", nil, fmt.Errorf("block number: %w", err)
	}
	if hash, ok = str(jsonscan.Member(raw, "hash")); !ok || len(hash) != 66 {
		return 0, "", nil, errors.New("block without a hash")
	}
	list := jsonscan.Member(raw, "transactions")
	if len(list) == 0 || list[0] != '[' {
		return 0, "", nil, errors.New("block without transactions")
	}
	it := jsonscan.Array{Data: list, I: 1}
	for {
		v, ok := it.Next()
		if !ok {
			break
		}
		if len(v) > 0 && v[0] == '{' {
			v = jsonscan.Member(v, "hash")
		}
		h, ok := str(v)
		if !ok || len(h) != 66 {
			return 0, "", nil, fmt.Errorf("transaction %d without a hash", len(txs))
		}
		txs = append(txs, h)
	}
	return n, strings.ToLower(hash), txs, nil
}

// ofBlock checks that every receipt in the array names the block hash: a
// remote that reorged between the calls answers for another block.
func ofBlock(receipts []byte, hash string) error {
	it := jsonscan.Array{Data: receipts, I: 1}
	for i := 0; ; i++ {
		rc, ok := it.Next()
		if !ok {
			return nil
		}
		if h, _ := str(jsonscan.Member(rc, "blockHash")); !strings.EqualFold(h, hash) {
			return fmt.Errorf("receipt %d is for block %s, not %s", i, h, hash)
		}
	}
}

// Block fetches block number n with full transactions and its receipts (by
// the block's hash) and checks that they belong together: what the history
// store keeps. A block the remotes do not have is ErrNoBlock.
func (f *Forger) Block(ctx context.Context, n uint64) (*evm.Block, error) {
	call := func(ctx context.Context, method string, params json.RawMessage,
		verify func(json.RawMessage) integrity.Verdict) (json.RawMessage, integrity.Verdict, error) {
		res, err := f.up(ctx, method, params, verify)
		return res, integrity.Verdict{}, err
	}
	b, err := FetchBlock(ctx, call, f.receipts, "eth_getBlockByNumber", `"`+evm.Quantity(n)+`"`)
	if err == nil && b.Number != n {
		return nil, fmt.Errorf("block %d: the remote answered block %d", n, b.Number)
	}
	return b, err
}

// VerdictCall is a call through the remotes whose answer verify checks; the
// verdict is the served answer's (zero when nothing was checked).
type VerdictCall func(ctx context.Context, method string, params json.RawMessage,
	verify func(json.RawMessage) integrity.Verdict) (json.RawMessage, integrity.Verdict, error)

// FetchBlock fetches one block with full transactions (method
// eth_getBlockByNumber or eth_getBlockByHash, ref the number or hash as a
// JSON string) and its receipts through r, and checks that they belong
// together, asking again by the block's hash (at most buildAttempts times)
// when a remote answered for another block between the two calls. A
// block asked for by number has its receipts asked for by number at the
// same time, so the two large answers travel together rather than one
// after the other; their check against the block waits for the block
// (off the critical path, never skipped), and receipts of a sibling are
// asked for again by the block's hash. The block is checked against what
// it says it is (integrity.VerifyBlock), and the receipts against the
// block, when call verifies. A block no remote has is ErrNoBlock. The
// leader, the backfill and the write-through fetch blocks this way.
func FetchBlock(ctx context.Context, call VerdictCall, r *Receipts, method, ref string) (*evm.Block, error) {
	params := json.RawMessage("[" + ref + ",true]")
	want, _ := evm.ParseBlockRef(json.RawMessage(ref))
	var early *earlyReceipts
	if method == "eth_getBlockByNumber" && want.Kind == evm.RefNumber && r.blockMethod() {
		early = r.byNumber(ctx, want.Number)
		defer early.stop()
	}
	var lastErr error
	for range buildAttempts {
		raw, blk, err := call(ctx, method, params, func(res json.RawMessage) integrity.Verdict {
			return integrity.VerifyBlock(res, want)
		})
		if err != nil {
			return nil, fmt.Errorf("%s(%s): %w", method, ref, err)
		}
		if string(raw) == "null" {
			return nil, fmt.Errorf("%s(%s): %w", method, ref, ErrNoBlock)
		}
		b, txs, err := evm.TxHashes(raw)
		if err != nil {
			return nil, fmt.Errorf("%s(%s): %w", method, ref, err)
		}
		if early != nil {
			res, err := early.wait(ctx, blk.Block)
			early = nil
			if err == nil && len(txs) > 0 {
				if b, err := evm.ParseBlock(raw, res); err == nil {
					return b, nil
				}
			}
			// None yet, or a sibling's: by the block's hash, as always.
		}
		receipts, err := r.OfBlock(ctx, b.Hash, txs, blk.Block)
		if err != nil {
			return nil, fmt.Errorf("receipts of block %d: %w", b.Number, err)
		}
		if b, err = evm.ParseBlock(raw, receipts); err == nil {
			return b, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%s(%s): %w", method, ref, lastErr)
}

// earlyReceipts is eth_getBlockReceipts of a block number, asked for
// while the block itself is: its answer is checked against the block once
// that is known (wait).
type earlyReceipts struct {
	cancel context.CancelFunc
	known  chan struct{} // closed by wait, once block is set
	block  *integrity.BlockInfo
	done   chan struct{}
	res    json.RawMessage
	err    error
}

// byNumber starts fetching block n's receipts.
func (r *Receipts) byNumber(ctx context.Context, n uint64) *earlyReceipts {
	ctx, cancel := context.WithCancel(ctx)
	e := &earlyReceipts{cancel: cancel, known: make(chan struct{}), done: make(chan struct{})}
	want := evm.BlockRef{Kind: evm.RefNumber, Number: n}
	go func() {
		defer close(e.done)
		e.res, e.err = r.up(ctx, "eth_getBlockReceipts", json.RawMessage(`["`+evm.Quantity(n)+`"]`),
			func(res json.RawMessage) integrity.Verdict {
				// The walk of the receipts (decoding, blooms, their root's
				// list) runs at once, beside the block's own check; only
				// the comparison with the block waits for it.
				return integrity.VerifyReceipts(res, want, func(h common.Hash) *integrity.BlockInfo {
					select {
					case <-e.known:
					case <-ctx.Done():
						return nil // unused: the fetch is abandoned
					}
					if e.block != nil && h == e.block.Hash {
						return e.block
					}
					return nil // a sibling's: FetchBlock asks again by hash
				})
			})
	}()
	return e
}

// wait hands the fetched block (as verified; nil: not verified) to the
// receipts' check and returns their answer.
func (e *earlyReceipts) wait(ctx context.Context, block *integrity.BlockInfo) (json.RawMessage, error) {
	e.block = block
	close(e.known)
	select {
	case <-e.done:
		return e.res, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// stop abandons the fetch if it is still on, and waits for it.
func (e *earlyReceipts) stop() {
	e.cancel()
	<-e.done
}

// ErrNoBlock: the remotes do not have the block asked for.
var ErrNoBlock = errors.New("no remote has the block")

// str returns the contents of a JSON string without escapes.
func str(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	if strings.IndexByte(string(s), '\\') >= 0 {
		return "", false
	}
	return string(s), true
}
