package integrity

import (
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/venn-gateway/venn/jsonscan"
)

// Check is one integrity check. The set is fixed: its names are metric
// label values.
type Check uint8

const (
	// CheckBlockRef: the answer is for the block asked for (its number or
	// hash, and every receipt's block).
	CheckBlockRef Check = iota + 1
	// CheckBlockHash: the block's hash is the hash of its header fields.
	CheckBlockHash
	// CheckTxHash: each transaction's hash is the hash of its fields.
	CheckTxHash
	// CheckTxRoot: transactionsRoot is the root of the transactions.
	CheckTxRoot
	// CheckWithdrawalsRoot: withdrawalsRoot is the root of the withdrawals.
	CheckWithdrawalsRoot
	// CheckReceiptsRoot: the block's receiptsRoot is the root of its receipts.
	CheckReceiptsRoot
	// CheckLogsBloom: each receipt's logsBloom, and the block's, is the bloom
	// of the logs.
	CheckLogsBloom

	numChecks = iota
)

var checkNames = [numChecks + 1]string{
	CheckBlockRef: "block_ref", CheckBlockHash: "block_hash", CheckTxHash: "transaction_hash",
	CheckTxRoot: "transactions_root", CheckWithdrawalsRoot: "withdrawals_root",
	CheckReceiptsRoot: "receipts_root", CheckLogsBloom: "logs_bloom",
}

func (c Check) String() string {
	if int(c) < len(checkNames) && checkNames[c] != "" {
		return checkNames[c]
	}
	return "unknown"
}

// AllChecks lists every check.
func AllChecks() []Check {
	out := make([]Check, 0, numChecks)
	for c := CheckBlockRef; c <= numChecks; c++ {
		out = append(out, c)
	}
	return out
}

// CheckSet is a set of checks.
type CheckSet uint16

// Has reports whether c is in the set.
func (s CheckSet) Has(c Check) bool { return s&(1<<c) != 0 }

func (s *CheckSet) add(c Check) { *s |= 1 << c }

// SkipReason says why a check was not run. The set is fixed: they are
// metric label values.
type SkipReason string

const (
	// SkipUnknownField: a member go-ethereum's type does not have (an L2's
	// header field, a newer fork's): the hash may cover it.
	SkipUnknownField SkipReason = "unknown_field"
	// SkipMissingField: a member the encoding needs is absent.
	SkipMissingField SkipReason = "missing_field"
	// SkipUndecodable: a value does not decode as its field's type.
	SkipUndecodable SkipReason = "undecodable"
	// SkipUnknownType: a transaction or receipt type go-ethereum can't
	// encode (an L2 deposit, 0x7e; Arbitrum's 0x64-0x6a).
	SkipUnknownType SkipReason = "unknown_type"
	// SkipUnsigned: a transaction without a signature, which no consensus
	// encoding holds (Polygon lists its state-sync transaction so).
	SkipUnsigned SkipReason = "unsigned"
	// SkipHashOnly: the block lists its transactions as hashes.
	SkipHashOnly SkipReason = "hash_only"
	// SkipHeaderUnverified: receipts are checked against a block whose
	// header hash could not be reproduced, so its roots are only claims.
	SkipHeaderUnverified SkipReason = "header_unverified"
	// SkipNoBlock: the receipts' block is not at hand to check them against.
	SkipNoBlock SkipReason = "no_block"
	// SkipPerTransaction: receipts fetched one at a time, from any remote:
	// their root proves nothing about one remote.
	SkipPerTransaction SkipReason = "per_transaction"
	// SkipSingleReceipt: eth_getTransactionReceipt, which has no root.
	SkipSingleReceipt SkipReason = "single_receipt"
	// SkipUnreproducible: every remote asked failed the check alike: venn's
	// encoding, not the remotes, is at odds with this chain.
	SkipUnreproducible SkipReason = "unreproducible"
)

// Skip is a check that was not run, and why.
type Skip struct {
	Check  Check
	Reason SkipReason
}

// Failure is a check that failed: the data contradicts itself.
type Failure struct {
	Check  Check
	Detail string
}

func (f Failure) String() string { return f.Check.String() + ": " + f.Detail }

// Verdict is what verifying one answer found. A check is in at most one of
// Passed, Failed and Skipped.
type Verdict struct {
	Passed  CheckSet
	Failed  []Failure
	Skipped []Skip
	// Block is what the block's receipts are checked against; VerifyBlock
	// sets it for a block.
	Block *BlockInfo
}

// Err is nil when nothing failed, else an error naming every failure.
func (v *Verdict) Err() error {
	if len(v.Failed) == 0 {
		return nil
	}
	parts := make([]string, len(v.Failed))
	for i, f := range v.Failed {
		parts[i] = f.String()
	}
	return fmt.Errorf("integrity: %s", strings.Join(parts, "; "))
}

// Excuse moves the failures of the checks in set to Skipped with reason.
func (v *Verdict) Excuse(set CheckSet, reason SkipReason) {
	kept := v.Failed[:0]
	for _, f := range v.Failed {
		if set.Has(f.Check) {
			v.Skipped = append(v.Skipped, Skip{Check: f.Check, Reason: reason})
			continue
		}
		kept = append(kept, f)
	}
	v.Failed = kept
}

// FailedSet is the set of checks that failed.
func (v *Verdict) FailedSet() CheckSet {
	var s CheckSet
	for _, f := range v.Failed {
		s.add(f.Check)
	}
	return s
}

func (v *Verdict) pass(c Check) { v.Passed.add(c) }

func (v *Verdict) fail(c Check, format string, args ...any) {
	v.Failed = append(v.Failed, Failure{Check: c, Detail: fmt.Sprintf(format, args...)})
}

func (v *Verdict) skip(c Check, reason SkipReason) {
	v.Skipped = append(v.Skipped, Skip{Check: c, Reason: reason})
}

// BlockInfo is what a block's receipts are checked against.
type BlockInfo struct {
	Hash   common.Hash // as the block states it
	Number uint64

	receiptsRoot common.Hash
	bloom        types.Bloom
	haveRoots    bool
	// trusted: the header's hash was reproduced, so its roots are the
	// block's and not only the remote's claim.
	trusted bool
	// receiptsSkip: why the receipts can't be checked as a whole (the block
	// holds a transaction no consensus encoding has); "" when they can.
	receiptsSkip SkipReason
}

func firstReason(have, next SkipReason) SkipReason {
	if have != "" {
		return have
	}
	return next
}

// unknownMember returns the first member of obj not in known, "" if none.
func unknownMember(obj []byte, known map[string]bool) string {
	i := jsonscan.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ""
	}
	it := jsonscan.Object{Data: obj, I: i + 1}
	for {
		k, _, ok := it.Next()
		if !ok {
			return ""
		}
		if !known[string(k)] {
			return string(k)
		}
	}
}

// unquote strips a JSON string's quotes; hex values carry no escapes.
func unquote(v []byte) string {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return string(v[1 : len(v)-1])
	}
	return string(v)
}
