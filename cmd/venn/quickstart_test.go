package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/freeport"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
)

// The README's quick start, run as written: its file blocks saved, its
// shell blocks run by one bash in a directory that looks like a checkout.
// Only its literal addresses change: the node's URL becomes a fake node
// serving chain 1337, the ports free ones; the chain's name gets a token
// so that its keys in the machine's Redis are this run's.
const (
	// quickstartBuild bounds the quick start's build of venn. It is a
	// compile, not a wait: without the race detector its packages are not
	// in the build cache the suite fills, and on a fresh machine or a new
	// tree, with every core busy, it took more than 5 minutes.
	quickstartBuild = 15 * time.Minute
	// quickstartRun bounds the rest of the quick start, once built: the
	// replicas' start and the calls.
	quickstartRun = 5 * time.Minute
	// quickstartStop bounds the replicas' drain once the test is done.
	quickstartStop = 30 * time.Second

	quickstartNode  = "http://127.0.0.1:8545"
	quickstartRedis = "redis://127.0.0.1:6379"
	quickstartChain = "mychain"
	quickstartDone  = "#quickstart-done"
)

// quickstartPorts are the ports the quick start names.
var quickstartPorts = []string{"8600", "9600", "9601", "8610", "9610", "9611"}

// quickstartStep is one code block of the quick start: a file to save
// (file is its name) or shell commands.
type quickstartStep struct {
	file string
	body string
}

var (
	quickstartBlock = regexp.MustCompile("(?s)```(\\w+)\n(.*?)```")
	quickstartSave  = regexp.MustCompile("Save this as `([^`]+)`")
	quickstartURL   = regexp.MustCompile(`http://127\.0\.0\.1:\d+/[\w/.-]*`)
)

// quickstartSection returns the README between the quickstart markers, as
// steps, and the URLs its prose names.
func quickstartSection(t *testing.T, readme string) ([]quickstartStep, []string) {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "<!-- quickstart -->")
	section, _, ok2 := strings.Cut(rest, "<!-- /quickstart -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no <!-- quickstart --> ... <!-- /quickstart --> section")
	}
	var (
		steps []quickstartStep
		urls  []string
		last  int
	)
	for _, m := range quickstartBlock.FindAllStringSubmatchIndex(section, -1) {
		prose := section[last:m[0]]
		urls = append(urls, quickstartURL.FindAllString(prose, -1)...)
		lang, body := section[m[2]:m[3]], section[m[4]:m[5]]
		switch lang {
		case "sh":
			steps = append(steps, quickstartStep{body: body})
		case "yaml":
			saves := quickstartSave.FindAllStringSubmatch(prose, -1)
			if len(saves) == 0 {
				t.Fatalf("the quick start's YAML block at %q is not preceded by \"Save this as `FILE`\"", firstLine(body))
			}
			steps = append(steps, quickstartStep{file: saves[len(saves)-1][1], body: body})
		default:
			t.Fatalf("the quick start has a %q block the test cannot run", lang)
		}
		last = m[1]
	}
	urls = append(urls, quickstartURL.FindAllString(section[last:], -1)...)
	return steps, urls
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// quickstartCheckout makes a directory that builds like the module's
// checkout (every top-level entry a link to the real one) and where the
// quick start's own files (venn, venn.yaml) land. Its path is the same on
// every run from one checkout: go's build cache keys a package by its
// directory, so a fresh path would compile the whole module again. A lock
// beside it keeps two runs from sharing it at once.
func quickstartCheckout(t *testing.T, root string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "venn-quickstart-"+hex.EncodeToString(sum[:6]))
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Close() }) // after the removal below: cleanups run last first
	locked := testkit.Poll(quickstartBuild+quickstartRun+quickstartStop, func() bool {
		return syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
	})
	if !locked {
		t.Fatalf("%s is still locked by another run of the quick start", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" || e.Name() == "venn" || e.Name() == "venn.yaml" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestQuickStart(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl not found: the quick start uses it (apt-get install curl)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, urls := quickstartSection(t, string(readme))
	for _, want := range append([]string{quickstartNode, quickstartRedis, quickstartChain}, quickstartPorts...) {
		if !strings.Contains(string(readme), want) {
			t.Fatalf("the quick start no longer says %q: update the test's substitutions", want)
		}
	}

	node := fakenode.Start(t, fakenode.Options{ChainID: 1337})
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:{*" + token + "*}*" })
	chain := "qs" + token
	ports, err := freeport.Ports(len(quickstartPorts))
	if err != nil {
		t.Fatal(err)
	}
	pairs := []string{
		quickstartNode, strings.TrimSuffix(node.URL(), "/"),
		quickstartRedis, "redis://" + testkit.RedisAddr,
		quickstartChain, chain,
	}
	port := map[string]string{}
	for i, p := range quickstartPorts {
		port[p] = strconv.Itoa(ports[i])
		pairs = append(pairs, "127.0.0.1:"+p, "127.0.0.1:"+port[p])
	}
	subst := strings.NewReplacer(pairs...)

	dir := quickstartCheckout(t, root)
	// On SIGTERM (the test's end) bash waits for the replicas it started,
	// so that its exit means theirs.
	var script strings.Builder
	script.WriteString("trap 'wait; exit 143' TERM\n")
	for i, s := range steps {
		if s.file != "" {
			if err := os.WriteFile(filepath.Join(dir, s.file), []byte(subst.Replace(s.body)), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		fmt.Fprintf(&script, "printf '\\n#quickstart-step %d\\n'\n%s", i, subst.Replace(s.body))
	}
	// The last step's processes go on: bash waits for them, so that
	// stopping its process group stops them and bash's exit says so.
	fmt.Fprintf(&script, "printf '\\n%s\\n'\nwait\n", quickstartDone)

	// stdout is the commands' answers; out is everything, for a failure.
	var stdout, out testkit.Buffer
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, &out), &out
	cmd.Env = quickstartEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stopGroup(t, cmd.Process.Pid, exited)
		if t.Failed() {
			t.Logf("the quick start's output:\n%s", out.String())
		}
	})

	// The build, first, then the rest: each within its own bound.
	ended := func(mark string) func() bool {
		return func() bool {
			select {
			case <-exited:
				return true
			default:
				return strings.Contains(stdout.String(), mark)
			}
		}
	}
	built := afterBuild(t, steps)
	if !testkit.Poll(quickstartBuild, ended(built)) || !strings.Contains(stdout.String(), built) {
		t.Fatalf("the quick start's build did not end within %v", quickstartBuild)
	}
	if !testkit.Poll(quickstartRun, ended(quickstartDone)) || !strings.Contains(stdout.String(), quickstartDone) {
		t.Fatalf("the quick start did not run to its end within %v of its build", quickstartRun)
	}
	outputs := stepOutputs(stdout.String())

	// Each replica's own id, first: the test removes their heartbeats.
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var ids []string
	for _, admin := range []string{port["9601"], port["9611"]} {
		var self struct {
			Replica string `json:"replica"`
		}
		body := get(t, client, "http://127.0.0.1:"+admin+"/admin/status")
		if err := json.Unmarshal(body, &self); err != nil || self.Replica == "" {
			t.Fatalf("/admin/status on %s answered %q", admin, body)
		}
		ids = append(ids, self.Replica)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rdb.HDel(ctx, keyspace.Replicas, ids...).Err()
	})

	// The head, through the first replica.
	var head struct {
		Result string `json:"result"`
	}
	blockNumber := outputOf(t, steps, outputs, "eth_blockNumber")
	if err := json.Unmarshal([]byte(blockNumber), &head); err != nil || head.Result != fmt.Sprintf("0x%x", node.Head()) {
		t.Fatalf("eth_blockNumber answered %q, want the node's head 0x%x", blockNumber, node.Head())
	}

	// The two replicas of the cluster, each listed by the first.
	var listed struct {
		Replicas []struct {
			Replica string `json:"replica"`
		} `json:"replicas"`
	}
	replicas := outputOf(t, steps, outputs, "/admin/replicas")
	if err := json.Unmarshal([]byte(replicas), &listed); err != nil {
		t.Fatalf("/admin/replicas answered %q: %v", replicas, err)
	}
	for _, id := range ids {
		found := false
		for _, r := range listed.Replicas {
			found = found || r.Replica == id
		}
		if !found {
			t.Errorf("/admin/replicas does not list replica %s: %s", id, replicas)
		}
	}
	if ids[0] == ids[1] {
		t.Errorf("both replicas are %s", ids[0])
	}

	// The pages the prose names answer: the status page, its JSON.
	if len(urls) == 0 {
		t.Fatal("the quick start names no page to open")
	}
	for _, u := range urls {
		body := get(t, client, subst.Replace(u))
		if strings.HasSuffix(u, "/status") && !strings.Contains(string(body), chain) {
			t.Errorf("%s does not show the chain %s", u, chain)
		}
	}
}

// afterBuild is the marker the script prints once the quick start's
// build (the step that runs go build) has ended: the next shell step's,
// or the end's.
func afterBuild(t *testing.T, steps []quickstartStep) string {
	t.Helper()
	build := -1
	for i, s := range steps {
		switch {
		case s.file != "":
		case build < 0 && strings.Contains(s.body, "go build"):
			build = i
		case build >= 0:
			return fmt.Sprintf("#quickstart-step %d\n", i)
		}
	}
	if build < 0 {
		t.Fatal("the quick start does not build venn (no go build)")
	}
	return quickstartDone
}

// quickstartEnv is the test's environment without what the quick start
// sets itself, as in a fresh shell.
func quickstartEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "VENN_") || name == "REDIS_URL" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// stepOutputs splits the script's output at its step markers.
func stepOutputs(out string) map[int]string {
	outputs := map[int]string{}
	step := -1
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, "#quickstart-step "); ok {
			step, _ = strconv.Atoi(strings.TrimSpace(rest))
			continue
		}
		if strings.TrimSpace(line) == quickstartDone {
			break
		}
		outputs[step] += line
	}
	return outputs
}

// outputOf is the output of the one step whose commands contain what.
func outputOf(t *testing.T, steps []quickstartStep, outputs map[int]string, what string) string {
	t.Helper()
	for i, s := range steps {
		if s.file == "" && strings.Contains(s.body, what) {
			return outputs[i]
		}
	}
	t.Fatalf("no command of the quick start asks for %s", what)
	return ""
}

func get(t *testing.T, client *http.Client, url string) []byte {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, body)
	}
	return body
}

// stopGroup stops bash and every process it started (its process group):
// SIGTERM lets the replicas drain while bash waits for them (its trap);
// what is left at the deadline is killed.
func stopGroup(t *testing.T, pid int, exited <-chan struct{}) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(quickstartStop):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
		t.Errorf("the quick start's processes were still running %v after SIGTERM; killed", quickstartStop)
	}
}
