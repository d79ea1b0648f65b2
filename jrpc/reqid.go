package jrpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
)

// requestIDHeader carries the id of every HTTP answer (and of a WebSocket
// upgrade): the id its request log line and its trace use.
const requestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a client's own request id: a UUID, a trace id or
// the like fits; longer ones are replaced rather than cut, since a cut id
// would no longer match the client's own logs.
const maxRequestIDLen = 64

// requestIDs makes request ids: a prefix random per process, so replicas
// and restarts do not collide, and a counter. One atomic add per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string {
	var b [32]byte
	buf := append(b[:0], g.prefix...)
	return string(strconv.AppendUint(buf, g.n.Add(1), 36))
}

// tagRequest gives r's answer its X-Request-Id and returns it: the
// client's own when it is one venn can pass on, else a new one.
func (s *Server) tagRequest(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get(requestIDHeader)
	if !validRequestID(id) {
		id = s.ids.next()
	}
	w.Header().Set(requestIDHeader, id)
	return id
}

// validRequestID accepts 1 to maxRequestIDLen characters safe in a header,
// a log line and a trace attribute: letters, digits and - _ . : / + =.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return true
}

// RequestID is the id of the HTTP request or WebSocket connection ctx's
// call came on: the X-Request-Id of its answer, and the id its request log
// line and trace carry. "" for a call served outside a transport.
func RequestID(ctx context.Context) string {
	if p, ok := ctx.Value(peerKey{}).(*Peer); ok {
		return p.RequestID
	}
	return ""
}
