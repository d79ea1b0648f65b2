package verdict

// The verdicts Classify (classify.go) gives.

// Class says what the pool should do with a failed call.
type Class uint8

const (
	// ClassCaller is the caller's own fault or a definitive answer: return it
	// at once, no failover.
	ClassCaller Class = iota
	// ClassRetry: this remote cannot serve it now; try another remote.
	ClassRetry
	// ClassThrottled: rate-limited, over capacity or out of credit; back this
	// remote off and try another.
	ClassThrottled
	// ClassTooLarge: a range, result, size or batch cap; split the request, or
	// try a remote with larger limits.
	ClassTooLarge
)

func (c Class) String() string {
	switch c {
	case ClassCaller:
		return "caller"
	case ClassRetry:
		return "retry"
	case ClassThrottled:
		return "throttled"
	case ClassTooLarge:
		return "too_large"
	}
	return "unknown"
}

// Reason is a short label for metrics and logs; the set is fixed here.
type Reason string

const (
	// ClassCaller.
	ReasonRevert                   Reason = "revert"
	ReasonExecution                Reason = "execution_error" // EVM halt other than revert, gas estimate
	ReasonInvalidTx                Reason = "invalid_tx"      // tx fails validation: fee, gas, nonce too high, encoding
	ReasonInsufficientFunds        Reason = "insufficient_funds"
	ReasonInvalidParams            Reason = "invalid_params"
	ReasonInvalidRequest           Reason = "invalid_request"
	ReasonAlreadyKnown             Reason = "already_known"
	ReasonNonceTooLow              Reason = "nonce_too_low"
	ReasonReplacementUnderpriced   Reason = "replacement_underpriced"
	ReasonSenderRateLimited        Reason = "sender_rate_limited"
	ReasonNotificationsUnsupported Reason = "notifications_unsupported"
	ReasonCanceled                 Reason = "canceled"

	// ClassRetry, not a fault.
	ReasonHeaderNotFound    Reason = "header_not_found"
	ReasonMissingState      Reason = "missing_state"
	ReasonPruned            Reason = "pruned"
	ReasonMissingData       Reason = "missing_data"
	ReasonSyncing           Reason = "syncing"
	ReasonTagUnsupported    Reason = "tag_unsupported"
	ReasonLagging           Reason = "lagging"
	ReasonMethodUnsupported Reason = "method_unsupported"
	ReasonTxPoolPolicy      Reason = "tx_pool_policy"
	// ReasonReplyBudget: venn's own budget of reply bytes in flight was
	// full; the remote did nothing wrong.
	ReasonReplyBudget Reason = "reply_budget"
	// ReasonUnknown is a fault only for a Go error we cannot place (did the
	// remote even answer?), not for a JSON-RPC error object.
	ReasonUnknown Reason = "unknown"

	// ClassRetry, a fault; ReasonTimeout is not one for an EVM execution
	// timeout, which says the call is heavy, not that the node is sick.
	ReasonTimeout      Reason = "timeout"
	ReasonServerError  Reason = "server_error"
	ReasonHTTP5xx      Reason = "http_5xx"
	ReasonHTTPStatus   Reason = "http_status"
	ReasonTransport    Reason = "transport"
	ReasonBadReply     Reason = "bad_reply"
	ReasonUnauthorized Reason = "unauthorized"

	// ClassThrottled.
	ReasonRateLimited Reason = "rate_limited"
	ReasonBilling     Reason = "billing"

	// ClassTooLarge.
	ReasonRangeTooLarge    Reason = "range_too_large"
	ReasonTooManyResults   Reason = "too_many_results"
	ReasonTooManyAddresses Reason = "too_many_addresses"
	ReasonResponseTooLarge Reason = "response_too_large"
	ReasonRequestTooLarge  Reason = "request_too_large"
	ReasonBatchTooLarge    Reason = "batch_too_large"
)

// Verdict is Classify's answer.
type Verdict struct {
	Class  Class
	Reason Reason
	// Fault: the remote misbehaved or is unhealthy (feeds breaker and score).
	// False for caller errors, missing data, unsupported methods, too-large,
	// rate limits (tracked separately), EVM execution timeouts and JSON-RPC
	// errors we do not recognise.
	Fault bool
	// MaxSpan is the block span a range error says works (a suggested range,
	// or the cap it names), else 0.
	MaxSpan uint64
	// Oldest is the earliest block a pruned remote's error names as the
	// one it has ("earliest available 100"), else 0.
	Oldest uint64
}

// LacksBlock reports a remote that lacks the call's block: geth's
// "header not found" (and "header for hash not found" for an EIP-1898
// hash), "unknown block", "block not found", and missing data such as
// EIP-1898's -32001 for a hash it does not know. Another remote, or the
// call by number, may have it.
func (v Verdict) LacksBlock() bool {
	return v.Reason == ReasonHeaderNotFound || v.Reason == ReasonMissingData
}

// The verdicts the rules (rules.go) and the steps of Classify give.
var (
	vRevert       = Verdict{Class: ClassCaller, Reason: ReasonRevert}
	vExecution    = Verdict{Class: ClassCaller, Reason: ReasonExecution}
	vInvalidTx    = Verdict{Class: ClassCaller, Reason: ReasonInvalidTx}
	vFunds        = Verdict{Class: ClassCaller, Reason: ReasonInsufficientFunds}
	vParams       = Verdict{Class: ClassCaller, Reason: ReasonInvalidParams}
	vRequest      = Verdict{Class: ClassCaller, Reason: ReasonInvalidRequest}
	vKnown        = Verdict{Class: ClassCaller, Reason: ReasonAlreadyKnown}
	vNonceLow     = Verdict{Class: ClassCaller, Reason: ReasonNonceTooLow}
	vReplacement  = Verdict{Class: ClassCaller, Reason: ReasonReplacementUnderpriced}
	vSenderLimit  = Verdict{Class: ClassCaller, Reason: ReasonSenderRateLimited}
	vNotifyUnsup  = Verdict{Class: ClassCaller, Reason: ReasonNotificationsUnsupported}
	vHeader       = Verdict{Class: ClassRetry, Reason: ReasonHeaderNotFound}
	vState        = Verdict{Class: ClassRetry, Reason: ReasonMissingState}
	vPruned       = Verdict{Class: ClassRetry, Reason: ReasonPruned}
	vMissing      = Verdict{Class: ClassRetry, Reason: ReasonMissingData}
	vSyncing      = Verdict{Class: ClassRetry, Reason: ReasonSyncing}
	vTag          = Verdict{Class: ClassRetry, Reason: ReasonTagUnsupported}
	vLagging      = Verdict{Class: ClassRetry, Reason: ReasonLagging}
	vUnsupported  = Verdict{Class: ClassRetry, Reason: ReasonMethodUnsupported}
	vPool         = Verdict{Class: ClassRetry, Reason: ReasonTxPoolPolicy}
	vUnknown      = Verdict{Class: ClassRetry, Reason: ReasonUnknown}
	vBudget       = Verdict{Class: ClassRetry, Reason: ReasonReplyBudget}
	vTimeout      = Verdict{Class: ClassRetry, Reason: ReasonTimeout, Fault: true}
	vEVMTimeout   = Verdict{Class: ClassRetry, Reason: ReasonTimeout} // the call is heavy; the node is fine
	vServer       = Verdict{Class: ClassRetry, Reason: ReasonServerError, Fault: true}
	vHTTP5xx      = Verdict{Class: ClassRetry, Reason: ReasonHTTP5xx, Fault: true}
	vHTTPStatus   = Verdict{Class: ClassRetry, Reason: ReasonHTTPStatus, Fault: true}
	vUnauthorized = Verdict{Class: ClassRetry, Reason: ReasonUnauthorized, Fault: true}
	vRateLimited  = Verdict{Class: ClassThrottled, Reason: ReasonRateLimited}
	vBilling      = Verdict{Class: ClassThrottled, Reason: ReasonBilling}
	vRange        = Verdict{Class: ClassTooLarge, Reason: ReasonRangeTooLarge}
	vResults      = Verdict{Class: ClassTooLarge, Reason: ReasonTooManyResults}
	vAddresses    = Verdict{Class: ClassTooLarge, Reason: ReasonTooManyAddresses}
	vResponse     = Verdict{Class: ClassTooLarge, Reason: ReasonResponseTooLarge}
	vReqSize      = Verdict{Class: ClassTooLarge, Reason: ReasonRequestTooLarge}
	vBatch        = Verdict{Class: ClassTooLarge, Reason: ReasonBatchTooLarge}
)
