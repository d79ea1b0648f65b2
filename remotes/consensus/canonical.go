package consensus

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// Hash is a digest of an answer's bytes or of its canonical form.
type Hash = [sha256.Size]byte

// Canonical answers: the forms two remotes' answers are compared in when
// their bytes differ.

// ErrorKey identifies a caller error given as an answer by its code and
// data; messages differ between node implementations for the same error.
func ErrorKey(err error, v verdict.Verdict) Hash {
	var je *jrpc.Error
	if !errors.As(err, &je) {
		return sha256.Sum256([]byte("error reason " + string(v.Reason)))
	}
	data := []byte(je.Data)
	if c, cerr := Canonical(je.Data, nil); cerr == nil {
		data = c
	}
	return sha256.Sum256(fmt.Appendf(nil, "error %d %s", je.Code, data))
}

// Canonical re-encodes a JSON value with sorted keys and without the
// ignored fields. Numbers keep their text.
func Canonical(raw json.RawMessage, ig *Ignore) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the value")
	}
	if ig != nil {
		v = ig.strip(v, ig.paths)
	}
	return json.Marshal(v)
}

// Ignore is a compiled ignore_fields list.
type Ignore struct {
	anyDepth map[string]bool
	paths    [][]string
}

// CompileIgnore compiles an ignore_fields list; none is nil.
func CompileIgnore(fields []string) (*Ignore, error) {
	if len(fields) == 0 {
		return nil, nil
	}
	s := &Ignore{anyDepth: map[string]bool{}}
	for _, f := range fields {
		segs := strings.Split(f, ".")
		if slices.Contains(segs, "") {
			return nil, fmt.Errorf("ignore_fields: %q is not a field name or a dotted path", f)
		}
		if len(segs) == 1 && f != "*" {
			s.anyDepth[f] = true
			continue
		}
		s.paths = append(s.paths, segs)
	}
	return s, nil
}

// strip drops the ignored fields from v in place; paths are the path
// suffixes still live at v. Arrays pass their paths on to every element.
func (s *Ignore) strip(v any, paths [][]string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if s.anyDepth[k] {
				delete(t, k)
				continue
			}
			var sub [][]string
			drop := false
			for _, p := range paths {
				if p[0] == k || p[0] == "*" {
					if len(p) == 1 {
						drop = true
						break
					}
					sub = append(sub, p[1:])
				}
			}
			if drop {
				delete(t, k)
				continue
			}
			if len(sub) > 0 || len(s.anyDepth) > 0 {
				t[k] = s.strip(c, sub)
			}
		}
	case []any:
		for i, c := range t {
			t[i] = s.strip(c, paths)
		}
	}
	return v
}
