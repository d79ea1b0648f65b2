package jrpc

// The default of limits.max_reply_bytes_in_flight comes from the memory
// the process may use: a quarter of it, so that one bad provider's huge
// replies cannot take the process to its limit (and the OOM killer) while
// the heap, the caches and the head window need the rest.

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

const (
	// MaxDefaultReplyBytesInFlight caps the derived default: four replies
	// at the largest max_response_bytes anyone needs.
	MaxDefaultReplyBytesInFlight int64 = 1 << 30
	// minDefaultReplyBytesInFlight floors it, so that a tiny limit still
	// lets ordinary answers through.
	minDefaultReplyBytesInFlight int64 = 4 << 20
	// replyShareOfMemory: the share of the memory limit replies may take.
	replyShareOfMemory = 4
)

// DefaultReplyBytesInFlight is limits.max_reply_bytes_in_flight's default:
// a quarter of the process's memory limit (MemoryLimit), at most
// MaxDefaultReplyBytesInFlight (1 GiB).
func DefaultReplyBytesInFlight() int64 {
	limit, _ := MemoryLimit()
	return replyBudgetFor(limit)
}

// replyBudgetFor is the reply budget of a process that may use limit
// bytes (0: not known).
func replyBudgetFor(limit int64) int64 {
	if limit <= 0 {
		return MaxDefaultReplyBytesInFlight
	}
	return min(max(limit/replyShareOfMemory, minDefaultReplyBytesInFlight), MaxDefaultReplyBytesInFlight)
}

// MemoryLimit is the memory the process may use, and where that comes
// from: GOMEMLIMIT (or debug.SetMemoryLimit) when set, else the memory
// cgroup's limit (a container's), else the host's memory ("gomemlimit",
// "cgroup", "host"). 0 and "" when none is known. It is read once.
func MemoryLimit() (int64, string) {
	l := memoryLimit()
	return l.bytes, l.source
}

type memLimit struct {
	bytes  int64
	source string
}

var memoryLimit = sync.OnceValue(readMemoryLimit)

func readMemoryLimit() memLimit {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return memLimit{l, "gomemlimit"}
	}
	if l := cgroupMemoryLimit(); l > 0 {
		return memLimit{l, "cgroup"}
	}
	if l := hostMemory(); l > 0 {
		return memLimit{l, "host"}
	}
	return memLimit{}
}

// noCgroupLimit: cgroup v1 says "no limit" with a number near 2^63.
const noCgroupLimit = 1 << 62

// cgroupMemoryLimit reads the memory limit of the process's cgroup, v2
// (memory.max) or v1 (memory.limit_in_bytes); 0 when none.
func cgroupMemoryLimit() int64 {
	var paths []string
	if f, err := os.Open("/proc/self/cgroup"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			// hierarchy-ID:controllers:path
			parts := strings.SplitN(s.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				paths = append(paths, filepath.Join("/sys/fs/cgroup", parts[2], "memory.max"))
			case strings.Contains(","+parts[1]+",", ",memory,"):
				paths = append(paths, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
			}
		}
		f.Close()
	}
	// Inside a container the cgroup's own files are at the root.
	paths = append(paths, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 && n < noCgroupLimit {
			return n
		}
	}
	return 0
}

// hostMemory is the host's memory (MemTotal of /proc/meminfo); 0 when
// unknown.
func hostMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return 0
}
