package cache

import (
	"encoding/binary"
	"errors"
)

// The Redis tier's envelope of an Entry, compact and binary so that a hit
// costs no JSON parse and the value stays byte for byte:
//
//	version (1 byte) | flags (1 byte) | block (uvarint) |
//	len(method) (uvarint) | method | value
const envelopeVersion = 1

const (
	flagError   = 1 << 0
	flagSettled = 1 << 1
)

// maxMethodLen bounds a method name in an envelope; the cache's method
// set is far below it.
const maxMethodLen = 255

var errEnvelope = errors.New("cache: malformed entry")

// encodeEntry returns e's envelope.
func encodeEntry(e Entry) []byte {
	method := e.Method
	if len(method) > maxMethodLen {
		method = method[:maxMethodLen]
	}
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(method)+len(e.Value))
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
	return append(b, e.Value...)
}

// decodeEntry parses an envelope; the entry's Value shares b's memory.
func decodeEntry(b []byte) (Entry, error) {
	if len(b) < 2 || b[0] != envelopeVersion {
		return Entry{}, errEnvelope
	}
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
	e.Method, e.Value = string(b[:mlen]), b[mlen:]
	return e, nil
}
