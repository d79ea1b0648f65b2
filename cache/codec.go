package cache

import (
	"encoding/binary"
	"errors"
	"math"
)

// The Redis tier's envelope of an Entry, compact and binary so that a hit
// costs no JSON parse and the value stays byte for byte:
//
//	version (1 byte) | flags (1 byte) | block (uvarint) |
//	len(method) (uvarint) | method | len(remote) (uvarint) | remote |
//	written (uvarint, unix ms) | value
//
// Version 1, without remote and written, is still read.
const (
	envelopeVersion   = 2
	envelopeVersionV1 = 1
)

const (
	flagError   = 1 << 0
	flagSettled = 1 << 1
)

// maxMethodLen bounds a method name in an envelope, and the remotes'
// names: the cache's method set and remotes' names are far below it.
const maxMethodLen = 255

var errEnvelope = errors.New("cache: malformed entry")

// encodeEntry returns e's envelope.
func encodeEntry(e Entry) []byte {
	method, remote := e.Method, e.Remote
	if len(method) > maxMethodLen {
		method = method[:maxMethodLen]
	}
	if len(remote) > maxMethodLen {
		remote = remote[:maxMethodLen]
	}
	b := make([]byte, 0, 2+4*binary.MaxVarintLen64+len(method)+len(remote)+len(e.Value))
	var flags byte
	if e.Error {
		flags |= flagError
	}
	if e.Settled {
		flags |= flagSettled
	}
	b = append(b, envelopeVersion, flags)
	b = binary.AppendUvarint(b, e.Block)
	b = binary.AppendUvarint(b, uint64(len(method)))
	b = append(b, method...)
	b = binary.AppendUvarint(b, uint64(len(remote)))
	b = append(b, remote...)
	b = binary.AppendUvarint(b, uint64(max(e.Written, 0)))
	return append(b, e.Value...)
}

// decodeEntry parses an envelope; the entry's Value shares b's memory.
func decodeEntry(b []byte) (Entry, error) {
	if len(b) < 2 || b[0] != envelopeVersion && b[0] != envelopeVersionV1 {
		return Entry{}, errEnvelope
	}
	v1 := b[0] == envelopeVersionV1
	e := Entry{Error: b[1]&flagError != 0, Settled: b[1]&flagSettled != 0}
	b = b[2:]
	block, n := binary.Uvarint(b)
	if n <= 0 {
		return Entry{}, errEnvelope
	}
	e.Block, b = block, b[n:]
	mlen, n := binary.Uvarint(b)
	if n <= 0 || mlen > maxMethodLen || uint64(len(b)-n) < mlen {
		return Entry{}, errEnvelope
	}
	b = b[n:]
	e.Method, b = string(b[:mlen]), b[mlen:]
	if !v1 {
		rlen, n := binary.Uvarint(b)
		if n <= 0 || rlen > maxMethodLen || uint64(len(b)-n) < rlen {
			return Entry{}, errEnvelope
		}
		b = b[n:]
		e.Remote, b = string(b[:rlen]), b[rlen:]
		written, n := binary.Uvarint(b)
		if n <= 0 || written > math.MaxInt64 {
			return Entry{}, errEnvelope
		}
		e.Written, b = int64(written), b[n:]
	}
	e.Value = b
	return e, nil
}
