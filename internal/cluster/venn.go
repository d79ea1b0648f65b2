package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
)

// VennPackage is what BuildVenn builds.
const VennPackage = "github.com/venn-gateway/venn/cmd/venn"

// BuildVenn builds cmd/venn into out.
func BuildVenn(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, VennPackage)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", VennPackage, err, b)
	}
	return nil
}

// Tail keeps the last bytes written to it, for concurrent writers (a
// child's stderr) and a reader that explains a failure with them.
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTail keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
