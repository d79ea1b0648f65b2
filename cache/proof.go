package cache

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/ethereum/go-ethereum/common"

	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/jrpc"
)

// Prover is what the proof check (verify: proofs) needs of a View: the
// state root of a block as the cluster holds it, and the remotes' answer
// to eth_getProof. With a View that is not one, no provable answer is
// stored.
type Prover interface {
	// StateRoot is the stateRoot of the block with hash (lowercase), read
	// from a header whose hash is hash (the head window's, the history
	// store's, or one header lookup checked by its hash); ok is false
	// when it cannot say.
	StateRoot(ctx context.Context, hash string) (root string, ok bool)
	// Proof is the remotes' answer to eth_getProof with params.
	Proof(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
}

// Results of a proof check: the result label of
// venn_cache_proof_checks_total.
const (
	proofVerified   = "verified"   // the answer is the proved state: stored
	proofMismatch   = "mismatch"   // the proof verifies, the answer is not what it proves: not stored, the proved state served
	proofBad        = "bad_proof"  // the proof does not verify against the root: not stored, served
	proofNone       = "no_proof"   // no remote answered eth_getProof: not stored, served
	proofNoRoot     = "no_root"    // the block's state root is not known: not stored, served
	proofUnreadable = "unreadable" // params venn does not read as geth does: not stored, served
)

// proofMismatchError answers an eth_getCode whose code is not the one its
// account's proof hashes to: the proof holds no code to answer with, and
// the remote's is known false, so no remote served the call (-32050;
// jrpc.ToWire makes it the wire error). The client may ask again.
type proofMismatchError struct{}

func (proofMismatchError) Error() string {
	return "no remote answered with the state its block's proof proves"
}
func (proofMismatchError) ErrorCode() int { return jrpc.CodeNoRemote }

var errProofMismatch error = proofMismatchError{}

// proves reports whether method's answers are checked before they are
// stored.
func (c *Cache) proves(method string) bool {
	return c.cfg.Verify == VerifyProofs && slices.Contains(integrity.ProvableMethods, method)
}

// proofFetch is a miss's proof fetches (its block's state root, and the
// account's eth_getProof), run beside the answer's own fetch once the
// block's hash is known: a checked miss then costs the slower of the two
// round trips, not their sum. Its goroutine is the miss's: stop ends it.
type proofFetch struct {
	done   chan struct{}
	cancel context.CancelFunc
	q      integrity.StateQuery
	ok     bool // q was read, the View proves, and a hash was given
	root   string
	rootOK bool
	proof  json.RawMessage
	err    error
}

// startProof starts the proof fetches of a provable call with params at
// the block with hash. They run under a note of their own: the call's note
// names the remote that answered it, not the proof's.
func (c *Cache) startProof(ctx context.Context, method string, params json.RawMessage, hash string, at View) *proofFetch {
	pf := &proofFetch{done: make(chan struct{})}
	pf.q, pf.ok = integrity.ReadStateQuery(method, params)
	pv, isProver := at.(Prover)
	if !pf.ok || !isProver || hash == "" {
		pf.ok = false
		close(pf.done)
		return pf
	}
	ctx, pf.cancel = context.WithCancel(jrpc.WithNote(ctx, &jrpc.Note{}))
	go func() {
		defer close(pf.done)
		pf.root, pf.rootOK = pv.StateRoot(ctx, hash)
		if pf.rootOK && method != "eth_getProof" { // eth_getProof's answer is its own proof
			pf.proof, pf.err = pv.Proof(ctx, integrity.ProofParams(pf.q, hash))
		}
	}()
	return pf
}

// stop ends pf's fetches, if still running, and waits for them.
func (pf *proofFetch) stop() {
	if pf.cancel != nil {
		pf.cancel()
	}
	<-pf.done
}

// prove checks res, a remote's answer to a provable call, against the
// account's proof at its block (pf). keep is true only for an answer that
// is the proved state. An answer the proof contradicts is never served:
// the state the proof holds is, in geth's spelling (balance, nonce, slot),
// or else errProofMismatch (code, and an eth_getProof whose stated values
// are not what its nodes prove). An answer that cannot be checked (no
// proof, no root, a proof that does not verify) is served as it came, and
// not stored: as with verify off, without the cache.
func (c *Cache) prove(method string, pf *proofFetch, res json.RawMessage) (json.RawMessage, error, bool) {
	result := proofUnreadable
	defer func() { c.countProof(method, result) }()
	if pf == nil || !pf.ok {
		return res, nil, false
	}
	<-pf.done
	if !pf.rootOK {
		result = proofNoRoot
		return res, nil, false
	}
	proof := res
	if method != "eth_getProof" {
		if pf.err != nil {
			result = proofNone
			return res, nil, false
		}
		proof = pf.proof
	}
	p, err := integrity.VerifyProof(common.HexToHash(pf.root), pf.q, proof)
	if err != nil {
		result = proofBad
		return res, nil, false
	}
	if p.Agrees(method, res) != nil {
		result = proofMismatch
		if ans, ok := p.Answer(method); ok {
			return ans, nil, false
		}
		return nil, errProofMismatch, false
	}
	result = proofVerified
	return res, nil, true
}

// countProof counts one proof check of method (in the provable set).
func (c *Cache) countProof(method, result string) {
	c.closed.ifOpen(func() { c.m.proofs.WithLabelValues(c.chain, method, result).Inc() })
}
