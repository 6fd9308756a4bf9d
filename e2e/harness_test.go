package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// corralBin is the corral binary built once for the whole test run by TestMain.
var corralBin string

func TestMain(m *testing.M) {
	// CORRAL_E2E_BIN runs the tests against a binary built elsewhere (an older commit's, to
	// see a test fail without its fix).
	if bin := os.Getenv("CORRAL_E2E_BIN"); bin != "" {
		corralBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "corral-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	corralBin = filepath.Join(dir, "corral")
	// Built in the library's own module, with -race, so the daemon's races fail the tests too.
	build := exec.Command("go", "build", "-race", "-o", corralBin, "./cmd/corral")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building corral:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildCorral returns the path of the corral binary (built by TestMain).
func buildCorral(tb testing.TB) string {
	tb.Helper()
	return corralBin
}

// freePort asks the kernel for a free loopback TCP port. The port is free when this returns;
// another process could take it before corral binds it, which on a test machine does not
// happen in practice. It never hands out a port twice in one test run: the kernel may give
// a port that was just closed again, and a node whose HTTP and gossip ports are the same
// never gets ready.
func freePort(tb testing.TB) int {
	tb.Helper()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, dup := portsHandedOut.LoadOrStore(port, true); !dup {
			return port
		}
	}
	tb.Fatal("no free port that was not handed out before")
	return 0
}

var portsHandedOut sync.Map // int → true

// proc is one running `corral serve`.
type proc struct {
	Name   string
	HTTP   string // "127.0.0.1:port"
	Gossip string // "127.0.0.1:port", usable as --join
	Peer   string // "127.0.0.1:port", the peer gRPC port
	cmd    *exec.Cmd
	log    *syncBuffer
	done   chan struct{} // closed when the process exited
	err    error         // the exit, valid after done
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startNode starts `corral serve` on loopback with free ports; extra flags are appended.
// The process is killed at cleanup if still running, and its log printed if the test failed.
func startNode(tb testing.TB, name string, join []string, extra ...string) *proc {
	tb.Helper()
	return startNodeAt(tb, &proc{
		Name:   name,
		HTTP:   "127.0.0.1:" + strconv.Itoa(freePort(tb)),
		Gossip: "127.0.0.1:" + strconv.Itoa(freePort(tb)),
		Peer:   "127.0.0.1:" + strconv.Itoa(freePort(tb)),
	}, join, extra...)
}

// startNodeAt starts `corral serve` named at.Name on at's ports (those of a node that has
// exited, for a restart in place, as a pod keeps its ports).
func startNodeAt(tb testing.TB, at *proc, join []string, extra ...string) *proc {
	tb.Helper()
	name := at.Name
	p := &proc{Name: name, HTTP: at.HTTP, Gossip: at.Gossip, Peer: at.Peer, log: &syncBuffer{}, done: make(chan struct{})}
	args := []string{"serve", "--name", name, "--bind", "127.0.0.1",
		"--http-port", strings.Split(p.HTTP, ":")[1],
		"--gossip-port", strings.Split(p.Gossip, ":")[1],
		"--peer-port", strings.Split(p.Peer, ":")[1],
		"--log-format", "json", "--drain", "200ms",
		// The nodes are -race builds on a machine that runs other suites at once: a live owner
		// can go unscheduled for longer than the 300 ms default, and would be failed over (an
		// extra fill these tests would count). Tests of silent owners pass their own.
		"--silent-peer-timeout", "2s"}
	for _, j := range join {
		args = append(args, "--join", j)
	}
	args = append(args, extra...)
	p.cmd = exec.Command(buildCorral(tb), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if tb.Failed() {
			tb.Logf("log of %s:\n%s", name, p.log.String())
		}
	})
	waitFor(tb, name+" ready", 20*time.Second, func() bool { return p.status("/readyz") == http.StatusOK })
	return p
}

// startCluster starts size nodes joined through the first and waits until each sees all.
func startCluster(tb testing.TB, size int, extra ...string) []*proc {
	tb.Helper()
	nodes := []*proc{startNode(tb, "node-0", nil, extra...)}
	for i := 1; i < size; i++ {
		nodes = append(nodes, startNode(tb, fmt.Sprint("node-", i), []string{nodes[0].Gossip}, extra...))
	}
	for _, n := range nodes {
		waitFor(tb, n.Name+" sees the cluster", 20*time.Second, func() bool { return len(n.cluster(tb, "").Members) == size })
	}
	return nodes
}

func (p *proc) url(path string) string { return "http://" + p.HTTP + path }

func (p *proc) status(path string) int {
	resp, err := http.Get(p.url(path))
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// get does a GET and returns status, X-Corral-Source and body.
func (p *proc) get(tb testing.TB, path string) (int, string, string) {
	tb.Helper()
	resp, err := http.Get(p.url(path))
	if err != nil {
		tb.Fatalf("GET %s on %s: %v", path, p.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Corral-Source"), string(b)
}

// do sends a request with a body and returns status and body.
func (p *proc) do(tb testing.TB, method, path, body string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(method, p.url(path), strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s on %s: %v", method, path, p.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type clusterView struct {
	Self    string `json:"self"`
	Epoch   uint64 `json:"epoch"`
	Owner   string `json:"owner"`
	Members []struct {
		Name  string  `json:"name"`
		Share float64 `json:"share"`
	} `json:"members"`
}

func (p *proc) cluster(tb testing.TB, key string) clusterView {
	tb.Helper()
	path := "/v1/cluster"
	if key != "" {
		path += "?key=" + key
	}
	resp, err := http.Get(p.url(path))
	if err != nil {
		return clusterView{}
	}
	defer resp.Body.Close()
	var v clusterView
	json.NewDecoder(resp.Body).Decode(&v)
	return v
}

// signal sends sig and waits for the exit, up to within.
func (p *proc) signal(tb testing.TB, sig syscall.Signal, within time.Duration) error {
	tb.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		tb.Fatalf("%s still running %v after %v", p.Name, within, sig)
		return nil
	}
}

func waitFor(tb testing.TB, what string, within time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countingOrigin is an HTTP origin that counts calls per path and answers after delay:
// 200 with "value of <key>" for /items/<key>, 404 for keys starting with "missing", 500 for
// keys starting with "broken", and a hang for keys starting with "hang".
type countingOrigin struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newOrigin(tb testing.TB, delay time.Duration) *countingOrigin {
	tb.Helper()
	o := &countingOrigin{calls: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.EscapedPath(), "/items/")
		o.mu.Lock()
		o.calls[key]++
		o.mu.Unlock()
		switch {
		case strings.HasPrefix(key, "hang"):
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		case strings.HasPrefix(key, "missing"):
			http.NotFound(w, r)
			return
		case strings.HasPrefix(key, "broken"):
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		time.Sleep(delay)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "value of %s", key)
	}))
	tb.Cleanup(o.Close)
	return o
}

func (o *countingOrigin) template() string { return o.URL + "/items/{key}" }

func (o *countingOrigin) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls[key]
}

// withTimeout is a context for one bounded step of a test.
func withTimeout(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
