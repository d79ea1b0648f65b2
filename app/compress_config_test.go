package app

import (
	"strings"
	"testing"
)

func TestCompressionConfig(t *testing.T) {
	c := mustParse(t, minimal+`
compression:
  replies: true
  encodings: [gzip]
  min_bytes: 4096
  level: best
  requests: false
  websocket: true
`)
	got := c.Compression
	if !got.Replies || len(got.Encodings) != 1 || got.Encodings[0] != "gzip" || got.MinBytes != 4096 ||
		got.Level != "best" || got.Requests == nil || *got.Requests || !got.WebSocket {
		t.Errorf("compression = %+v", got)
	}

	d := mustParse(t, minimal).Compression
	if d.Replies || d.MinBytes != 1024 || d.Level != "fastest" || d.Requests == nil || !*d.Requests || d.WebSocket ||
		strings.Join(d.Encodings, ",") != "zstd,gzip" {
		t.Errorf("defaults = %+v", d)
	}

	_, err := Parse([]byte(minimal + "compression:\n  encodings: [br]\n  level: max\n"))
	for _, want := range []string{`compression.encodings[0]: must be gzip or zstd, not "br"`, `compression.level: must be fastest, default or best`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}
