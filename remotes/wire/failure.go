package wire

// What a remote last failed with, in one word: the kind -32050's data,
// /readyz and the admin API show beside a remote's name, so that an
// operator (or a new user with no network) sees "dns" or "tls" rather than
// "no remote available" with nothing saying why.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
)

// Failure kinds of a transport fault. Faults with an answer (an HTTP
// status, a node's error, a bad reply) are named by their Classify reason
// (unauthorized, rate_limited, http_5xx, bad_reply, ...).
const (
	FailDNS         = "dns"         // the host name did not resolve
	FailRefused     = "refused"     // nothing listens at the address
	FailUnreachable = "unreachable" // no route to the host or network
	FailTLS         = "tls"         // handshake or certificate: wrong chain of trust, name, expiry
	FailTimeout     = "timeout"     // no answer in time
	FailReset       = "reset"       // the connection was closed or reset under the call
	FailTransport   = "transport"   // another network fault
	FailWrongChain  = "wrong_chain" // it answered with another chain's id
)

// kindError carries the kind of a transport fault whose text was redacted
// (the redacted text no longer wraps the cause the kind is read from).
type kindError struct {
	error
	kind string
}

func (e *kindError) Unwrap() error { return e.error }

// FailureKind names the kind of err, a transport fault, "" when err is
// not one it knows.
func FailureKind(err error) string {
	if ke, ok := errors.AsType[*kindError](err); ok {
		return ke.kind
	}
	return netKind(err)
}

// netKind reads the kind of a network-level error, "" when err is not one
// it knows.
func netKind(err error) string {
	var (
		dnsErr   *net.DNSError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return FailTimeout
		}
		return FailDNS
	case errors.As(err, &verify), errors.As(err, &record), errors.As(err, &alert),
		errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return FailTLS
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailRefused
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return FailUnreachable
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return FailReset
	}
	if ne, ok := errors.AsType[net.Error](err); ok {
		if ne.Timeout() {
			return FailTimeout
		}
		return FailTransport
	}
	return ""
}
