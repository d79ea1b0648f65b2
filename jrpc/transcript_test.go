package jrpc

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/testkit"
)

// Transcripts in testdata/*.txt replay a conversation, as go-ethereum's
// rpc/testdata does: "--> " lines are sent, the "<-- " line after one is the
// exact answer (none: no answer at all). Each runs over HTTP and WebSocket.

type transcriptStep struct {
	line int
	send string
	want string // "" when no answer is expected
}

func readTranscript(t *testing.T, path string) []transcriptStep {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []transcriptStep
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "--> "):
			steps = append(steps, transcriptStep{line: n, send: strings.TrimPrefix(line, "--> ")})
		case strings.HasPrefix(line, "<-- "):
			if len(steps) == 0 || steps[len(steps)-1].want != "" {
				t.Fatalf("%s:%d: answer without a request", path, n)
			}
			steps[len(steps)-1].want = strings.TrimPrefix(line, "<-- ")
		case line == "" || strings.HasPrefix(line, "//"):
		default:
			t.Fatalf("%s:%d: unknown line %q", path, n, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 {
		t.Fatalf("%s: no requests", path)
	}
	return steps
}

func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, path := range files {
		steps := readTranscript(t, path)
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name+"/http", func(t *testing.T) {
			s := newTestServer(t, Options{}, echoHandler())
			for _, st := range steps {
				status, got := s.post(t, st.send)
				if status != 200 {
					t.Errorf("%s:%d: status %d, want 200", path, st.line, status)
				}
				if got != st.want {
					t.Errorf("%s:%d: sent %s\n got: %s\nwant: %s", path, st.line, st.send, got, st.want)
				}
			}
		})
		t.Run(name+"/ws", func(t *testing.T) {
			s := newTestServer(t, Options{}, echoHandler())
			c := s.dial(t)
			const sentinel = `{"jsonrpc":"2.0","id":"sentinel","method":"test_echo","params":[]}`
			const sentinelAnswer = `{"jsonrpc":"2.0","id":"sentinel","result":[]}`
			for _, st := range steps {
				testkit.WSWrite(t, c, st.send)
				want := st.want
				if want == "" {
					// Nothing may come back: the next answer must be the
					// sentinel's.
					testkit.WSWrite(t, c, sentinel)
					want = sentinelAnswer
				}
				if got := testkit.WSRead(t, c); got != want {
					t.Errorf("%s:%d: sent %s\n got: %s\nwant: %s", path, st.line, st.send, got, want)
				}
			}
		})
	}
}
