package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Everything the suite creates carries labelRun (this run's id) and labelOwner (the pid of the
// test process), so that t.Cleanup removes it and a later run sweeps what a killed run left.
const (
	labelRun   = "corral.e2e.faults"
	labelOwner = "corral.e2e.faults.owner"
	image      = "corral:faults"
	originImg  = "corral-faults-origin:faults"
)

var (
	runID     = fmt.Sprintf("f%d", time.Now().UnixNano()%1e8)
	buildOnce sync.Once
	buildErr  error
)

// needDocker skips the test when Docker is unavailable (fails when CI is set), sweeps the
// leftovers of dead runs and builds both images once per run.
func needDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil || exec.Command("docker", "info").Run() != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker is not available, and CI needs the failure suite")
		}
		t.Skip("docker is not available: the failure suite needs a running Docker engine (it fails instead when CI is set)")
	}
	buildOnce.Do(func() {
		sweep()
		buildErr = buildImages()
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

func buildImages() error {
	mk := exec.Command("make", "image", "IMAGE="+image)
	mk.Dir = "../.."
	if out, err := mk.CombinedOutput(); err != nil {
		return fmt.Errorf("make image: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "corral-faults-origin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, "origin"), "./origin")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the origin: %v\n%s", err, out)
	}
	df, err := os.ReadFile("origin/Dockerfile")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), df, 0o644); err != nil {
		return err
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", originImg, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("docker build origin: %v\n%s", err, out)
	}
	return nil
}

// sweep removes the containers and networks of earlier runs whose owner process is gone.
func sweep() {
	dead := func(pid string) bool {
		p, err := strconv.Atoi(pid)
		return err != nil || syscall.Kill(p, 0) == syscall.ESRCH
	}
	format := `{{.ID}} {{.Label "` + labelOwner + `"}}`
	for _, kind := range []string{"container", "network"} {
		args := []string{kind, "ls", "-q", "--filter", "label=" + labelOwner, "--format", format}
		if kind == "container" {
			args = []string{"ps", "-a", "--filter", "label=" + labelOwner, "--format", format}
		}
		out, _ := exec.Command("docker", args...).Output()
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			if len(f) == 2 && dead(f[1]) {
				if kind == "container" {
					exec.Command("docker", "rm", "-f", f[0]).Run()
				} else {
					exec.Command("docker", "network", "rm", f[0]).Run()
				}
			}
		}
	}
}

func labels() []string {
	return []string{"--label", labelRun + "=" + runID, "--label", labelOwner + "=" + strconv.Itoa(os.Getpid())}
}

func docker(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// node is one corral serve container.
type node struct {
	name string // member name
	ctr  string // container name
	ip   string // address on the cluster network
	addr string // where the driver reaches its HTTP port now (its origin-network IP while cut off)
	up   bool   // the driver sends it requests
	// inflight counts the driver's requests to it, so a test can let them end before it
	// kills the node (a request to a node the test kills is the test's failure, not corral's).
	inflight sync.WaitGroup
}

// cluster is one scenario's private world: a cluster network (corral nodes behind one alias,
// gossip and peer traffic: every node advertises its address there) and an origin network
// (the origin, and every node's second interface). A partition disconnects a node from the
// cluster network alone, so the origin stays reachable from it, over the very path it used
// before, and so does the test, which reaches every node's HTTP port on the origin network.
type cluster struct {
	t          *testing.T
	id         string
	net, onet  string
	prefix     string // "10.a.b." of the cluster network
	oprefix    string // "10.c.d." of the origin network
	originAddr string // host:port of the origin, for the test
	flags      []string
	nextIP     int

	mu sync.Mutex
	// guards nodes, each node's addr and up, cut and at
	nodes []*node
	cut   map[*node]bool    // cut off the cluster network (until the driver's strengthen)
	at    map[string]string // origin-network IP to the name of the node that had it
}

const alias = "corral"

// newCluster creates the networks and the origin; nodes are added with add.
func newCluster(t *testing.T, name string, flags ...string) *cluster {
	needDocker(t)
	c := &cluster{t: t, id: runID + "-" + name, flags: flags, nextIP: 10}
	c.net, c.prefix = c.network("c")
	c.onet, c.oprefix = c.network("o")
	ctr := c.id + "-origin"
	args := append([]string{"run", "-d", "--name", ctr}, labels()...)
	args = append(args, "--network", c.onet, "--ip", c.oprefix+"2", "--network-alias", "origin", originImg)
	docker(t, args...)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", ctr).Run() })
	c.originAddr = c.oprefix + "2:9000"
	c.waitFor("origin answers", 30*time.Second, func() bool {
		return c.originPost("/delay?d=0s") == nil
	})
	return c
}

// network creates a bridge network with a /24 subnet of its own (a fixed subnet lets a node
// come back with the address it had, or with another one, as the test says).
func (c *cluster) network(kind string) (string, string) {
	name := c.id + "-" + kind
	var last string
	for range 20 {
		a, b := 200+rand.IntN(50), rand.IntN(256)
		subnet := fmt.Sprintf("10.%d.%d.0/24", a, b)
		args := append([]string{"network", "create", "--subnet", subnet}, labels()...)
		out, err := exec.Command("docker", append(args, name)...).CombinedOutput()
		if err == nil {
			c.t.Cleanup(func() { exec.Command("docker", "network", "rm", name).Run() })
			return name, fmt.Sprintf("10.%d.%d.", a, b)
		}
		last = string(out)
	}
	c.t.Fatalf("docker network create: %s", last)
	return "", ""
}

// logLevel is the nodes' --log-level: CORRAL_E2E_LOGLEVEL, or warn. With CORRAL_E2E_LOGDIR
// set, a failed test also writes every node's whole log there.
func logLevel() string {
	if l := os.Getenv("CORRAL_E2E_LOGLEVEL"); l != "" {
		return l
	}
	return "warn"
}

// add starts a node named name at a fresh address of the cluster network.
func (c *cluster) add(name string) *node {
	c.nextIP++
	n := &node{name: name, ctr: c.id + "-" + name, ip: c.prefix + strconv.Itoa(c.nextIP), addr: c.oprefix + strconv.Itoa(c.nextIP) + ":8080"}
	c.run(n)
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n
}

func (c *cluster) run(n *node) {
	args := append([]string{"run", "-d", "--name", n.ctr}, labels()...)
	args = append(args, "--network", c.net, "--ip", n.ip, "--network-alias", alias, image,
		"serve", "--name", n.name, "--join", "dns+"+alias+":7946", "--advertise", n.ip,
		"--origin", "http://"+c.originAddr+"/items/{group}/{key}", "--log-format", "text", "--log-level", logLevel())
	args = append(args, c.flags...)
	docker(c.t, args...)
	docker(c.t, "network", "connect", "--ip", strings.TrimSuffix(n.addr, ":8080"), c.onet, n.ctr)
	c.mu.Lock()
	if c.at == nil {
		c.at = map[string]string{}
	}
	c.at[strings.TrimSuffix(n.addr, ":8080")] = n.name
	c.mu.Unlock()
	ctr := n.ctr
	c.t.Cleanup(func() {
		if c.t.Failed() {
			out, _ := exec.Command("docker", "logs", "--tail", "60", ctr).CombinedOutput()
			c.t.Logf("last logs of %s:\n%s", ctr, out)
			if dir := os.Getenv("CORRAL_E2E_LOGDIR"); dir != "" {
				all, _ := exec.Command("docker", "logs", ctr).CombinedOutput()
				if err := os.WriteFile(filepath.Join(dir, ctr+".log"), all, 0o644); err == nil {
					c.t.Logf("all logs of %s: %s", ctr, filepath.Join(dir, ctr+".log"))
				}
			}
		}
		exec.Command("docker", "rm", "-f", ctr).Run()
	})
	c.mu.Lock()
	n.up = false
	c.mu.Unlock()
}

// setUp says whether the driver sends n requests; taking a node out waits for the requests it
// has in flight (each bounded by its deadline).
func (c *cluster) setUp(n *node, up bool) {
	c.mu.Lock()
	n.up = up
	c.mu.Unlock()
	if !up {
		n.inflight.Wait()
	}
}

// pick returns a random node the driver may use, with its address, and marks a request in
// flight on it (the caller calls done).
func (c *cluster) pick(r *rand.Rand) (*node, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up []*node
	for _, n := range c.nodes {
		if n.up {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return nil, ""
	}
	n := up[r.IntN(len(up))]
	n.inflight.Add(1)
	return n, n.addr
}

func (c *cluster) addrOf(n *node) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return n.addr
}

func (c *cluster) live() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

func (c *cluster) drop(n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = slices.DeleteFunc(c.nodes, func(m *node) bool { return m == n })
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}

type clusterView struct {
	Self    string `json:"self"`
	Epoch   uint64 `json:"epoch"`
	Owner   string `json:"owner"`
	Members []struct {
		Name     string `json:"name"`
		PeerAddr string `json:"peer_addr"`
	} `json:"members"`
}

func viewOf(addr, key string) (clusterView, error) {
	var v clusterView
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	u := "http://" + addr + "/v1/cluster"
	if key != "" {
		u += "?key=" + key
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	resp, err := client.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return v, fmt.Errorf("status %d", resp.StatusCode)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// converge waits until every node in on sees exactly the members of on, at the addresses they
// have now, all with one epoch, and returns how long it took.
func (c *cluster) converge(what string, on []*node, bound time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	want := map[string]string{}
	for _, n := range on {
		want[n.name] = n.ip + ":7947"
	}
	c.waitFor(what, bound, func() bool {
		var epoch uint64
		for i, n := range on {
			v, err := viewOf(c.addrOf(n), "")
			if err != nil || len(v.Members) != len(want) || (i > 0 && v.Epoch != epoch) {
				return false
			}
			epoch = v.Epoch
			for _, m := range v.Members {
				if want[m.Name] != m.PeerAddr {
					return false
				}
			}
		}
		return true
	})
	return time.Since(start)
}

// owner returns the node that n routes key to.
func (c *cluster) owner(via *node, key string) *node {
	c.t.Helper()
	v, err := viewOf(c.addrOf(via), key)
	if err != nil {
		c.t.Fatalf("owner of %s: %v", key, err)
	}
	for _, n := range c.live() {
		if n.name == v.Owner {
			return n
		}
	}
	c.t.Fatalf("owner of %s is %q, not a node of the test", key, v.Owner)
	return nil
}

func (c *cluster) waitFor(what string, bound time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) originPost(path string) error {
	resp, err := client.Post("http://"+c.originAddr+path, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("origin %s: %d", path, resp.StatusCode)
	}
	return nil
}

// bump advances key's generation at the origin and returns the new one.
func (c *cluster) bump(key string) (int, error) {
	resp, err := client.Post("http://"+c.originAddr+"/bump?key="+key, "", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(b))
}

type originCounts struct {
	Calls    map[string]int         `json:"calls"`
	Times    map[string][]time.Time `json:"times"`
	From     map[string][]string    `json:"from"` // the caller's origin-network IP of each of Times
	Inflight int                    `json:"inflight"`
}

func (c *cluster) counts(times ...bool) originCounts {
	c.t.Helper()
	var oc originCounts
	q := ""
	if len(times) > 0 && times[0] {
		q = "?times"
	}
	resp, err := client.Get("http://" + c.originAddr + "/counts" + q)
	if err != nil {
		c.t.Fatalf("origin counts: %v", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&oc); err != nil {
		c.t.Fatalf("origin counts: %v", err)
	}
	return oc
}

// nameAt names the node that had ip on the origin network (the caller of an origin call).
func (c *cluster) nameAt(ip string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name, ok := c.at[ip]; ok {
		return name
	}
	return ip
}

// calls sums the origin calls of the keys that start with prefix.
func (oc originCounts) calls(prefix string) int {
	sum := 0
	for k, n := range oc.Calls {
		if strings.HasPrefix(k, prefix) {
			sum += n
		}
	}
	return sum
}

// do sends one request to a node's HTTP API with a deadline.
func do(addr, method, path, body string, deadline time.Duration) (int, string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("past its %v deadline: %w", deadline, err)
		}
		return 0, "", "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String(), resp.Header.Get("X-Corral-Source"), err
}

// partition cuts n off the cluster network; it keeps its origin-network interface.
func (c *cluster) partition(n *node) {
	c.mu.Lock()
	if c.cut == nil {
		c.cut = map[*node]bool{}
	}
	c.cut[n] = true
	c.mu.Unlock()
	docker(c.t, "network", "disconnect", c.net, n.ctr)
}

// heal puts n back on the cluster network at its address, under the alias.
func (c *cluster) heal(n *node) {
	docker(c.t, "network", "connect", "--ip", n.ip, "--alias", alias, c.net, n.ctr)
}

// side is 1 for a node cut off (or healed but not yet settled, see driver.strengthen), else 0.
func (c *cluster) side(n *node) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut[n] {
		return 1
	}
	return 0
}

func (c *cluster) cutActive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cut) > 0
}
