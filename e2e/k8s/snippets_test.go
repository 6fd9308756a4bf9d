package k8s

import (
	"bufio"
	"context"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The Go lines a newcomer copies — the README's, the package documentation's (go doc corral)
// and those the chart prints at `helm install` in library mode — are built as programs and
// run, three copies of each, with what the chart gives a pod; the three must form one
// cluster. The old snippets built a Config with zero ports and a dns+ seed: each replica bound a
// random port, dialed 7946 where nobody listened, and stayed a cluster of one.
//
// What stands for what, and why it is honest:
//
//   - A pod is a process in a mount namespace of its own (unshare, so the test needs root). Its
//     address, POD_IP, is 127.A.B.1, .2 or .3 (A and B drawn per run, so that runs on one
//     machine do not meet): three addresses, one port each, as three pods have — on loopback,
//     not on a pod network, and bound to that address, as the snippets bind POD_IP.
//   - Cluster DNS is /etc/hosts, bind-mounted in each namespace: the chart's headless Service
//     (the one helm installed, with publishNotReadyAddresses), <name>.<namespace>.svc.cluster.local,
//     resolves to the three addresses, as CoreDNS answers for it. A snippet that names another
//     Service resolves to nothing and forms no cluster.
//   - The Downward API is the environment: POD_NAME and POD_IP, what the notes tell a pod
//     template to carry (and what the chart's own pods get, in server mode).
//   - The gossip key Secret is the one helm generated, read from the control plane and written
//     to a file; the snippet's path, /etc/corral/gossip/key (where the pod mounts it), is
//     rewritten to that file: the one change made to a snippet's text.
//   - The application around a snippet: a main that runs it, a User type and a db whose
//     LoadUser returns one, and, after it, a loop that prints the node's members until SIGTERM.
//
// The notes of discovery.mode=k8s are built too, not run: their EndpointSlices would need pods
// (e2e/k8s/node runs examples/catalog that way).
func TestSnippetsFormOneCluster(t *testing.T) {
	needRoot(t)
	const release, ns = "shop-cache", "default" // the README's and doc.go's
	notes := helm(t, "install", release, chartDir, "--namespace", ns,
		"--set", "mode=library", "--set", "library.selector.app=shop")
	t.Cleanup(func() { helmErr("uninstall", release, "--namespace", ns) })
	notesK8s := helm(t, "install", "shop-k8s", chartDir, "--namespace", ns,
		"--set", "mode=library", "--set", "library.selector.app=shop-k8s", "--set", "discovery.mode=k8s")
	t.Cleanup(func() { helmErr("uninstall", "shop-k8s", "--namespace", ns) })

	ctx := context.Background()
	headless, err := cp.client.CoreV1().Services(ns).Get(ctx, release+"-corral-headless", getOpts)
	if err != nil {
		t.Fatal(err)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("%s is not a headless Service publishing not-ready pods", headless.Name)
	}
	secret, err := cp.client.CoreV1().Secrets(ns).Get(ctx, release+"-corral-gossip", getOpts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, secret.Data["key"], 0o400); err != nil {
		t.Fatal(err)
	}
	pods := podAddrs()
	hosts := filepath.Join(dir, "hosts")
	writeHosts(t, hosts, headless.Name+"."+ns+".svc.cluster.local", pods)

	snippets := map[string]string{
		"README.md": readmeSnippet(t, filepath.Join(repoRoot, "README.md")),
		"doc.go":    docSnippet(t, filepath.Join(repoRoot, "doc.go")),
		"NOTES.txt": notesSnippet(t, notes),
	}
	for _, name := range []string{"README.md", "doc.go", "NOTES.txt"} {
		t.Run(name, func(t *testing.T) {
			prog := buildSnippet(t, snippets[name], keyFile)
			runCopies(t, prog, hosts, pods)
		})
	}
	t.Run("NOTES.txt, discovery.mode=k8s (built only)", func(t *testing.T) {
		buildSnippet(t, notesSnippet(t, notesK8s), keyFile)
	})
}

// needRoot skips the test unless it runs as root (it makes mount namespaces), and fails it in CI.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("unshare"); err == nil {
			return
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("this test needs root and unshare (util-linux) in CI")
	}
	t.Skip("needs root and unshare: each copy runs in a mount namespace with its own /etc/hosts")
}

// podAddrs returns three loopback addresses in a /24 drawn at random: the pods' IPs.
func podAddrs() []string {
	a, b := 100+rand.IntN(100), 1+rand.IntN(254)
	return []string{fmt.Sprintf("127.%d.%d.1", a, b), fmt.Sprintf("127.%d.%d.2", a, b), fmt.Sprintf("127.%d.%d.3", a, b)}
}

// writeHosts writes this machine's /etc/hosts with name resolving to every address of ips.
func writeHosts(t *testing.T, path, name string, ips []string) {
	t.Helper()
	base, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(base)
	b.WriteString("\n# The headless Service, as cluster DNS answers for it.\n")
	for _, ip := range ips {
		fmt.Fprintf(&b, "%s %s\n", ip, name)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readmeSnippet returns the README's one fenced Go block.
func readmeSnippet(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```go\n(.*?)^```$").FindAllStringSubmatch(string(b), -1)
	if len(blocks) != 1 {
		t.Fatalf("%s has %d Go blocks; this test builds exactly one (add the others here)", path, len(blocks))
	}
	return blocks[0][1]
}

// docSnippet returns the code block under "# Usage" in a package's doc comment.
func docSnippet(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, usage, ok := strings.Cut(string(b), "// # Usage\n//\n")
	if !ok {
		t.Fatalf("%s has no # Usage section", path)
	}
	var code strings.Builder
	for line := range strings.Lines(usage) {
		switch {
		case strings.HasPrefix(line, "//\t"):
			code.WriteString(strings.TrimPrefix(line, "//\t"))
		case line == "//\n":
			code.WriteString("\n")
		default:
			return strings.TrimRight(code.String(), "\n") + "\n"
		}
	}
	t.Fatalf("%s: # Usage does not end", path)
	return ""
}

// notesSnippet returns the Go lines of helm's notes: the lines indented by four spaces, from
// the one that calls corral.DefaultConfig to the first that is not indented.
func notesSnippet(t *testing.T, notes string) string {
	t.Helper()
	_, rest, ok := strings.Cut(notes, "    cfg := corral.DefaultConfig()")
	if !ok {
		t.Fatalf("the notes show no corral.DefaultConfig():\n%s", notes)
	}
	var code strings.Builder
	for line := range strings.Lines("    cfg := corral.DefaultConfig()" + rest) {
		if !strings.HasPrefix(line, "    ") {
			break
		}
		code.WriteString(strings.TrimPrefix(line, "    "))
	}
	return code.String()
}

// packages maps the package names a snippet may use to their import paths.
var packages = map[string]string{
	"corral":     "github.com/corralcache/corral",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"context":    "context",
	"os":         "os",
	"time":       "time",
	"fmt":        "fmt",
	"errors":     "errors",
	"slog":       "log/slog",
}

// harness is the application around a snippet: %s are the imports, the snippet, and uses of
// the variables it declares (Go refuses a variable declared and not used, like u in
// `u, err := users.Get(ctx, "42")`).
const harness = `package main

import (
%s)

// User and db stand for the application's own type and store.
type User struct{ ID string }

type store struct{}

func (store) LoadUser(ctx context.Context, id string) (User, error) { return User{ID: id}, nil }

var db store

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "snippet:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	// The snippet.
%s
	// The snippet's variables, used.
%s
	return report(ctx, node)
}

// report prints the node's members each time they change, until SIGTERM.
func report(ctx context.Context, node *corral.Node) error {
	last := ""
	for {
		var names []string
		for _, m := range node.Members() {
			names = append(names, m.Name)
		}
		if s := strings.Join(names, ","); s != last {
			fmt.Println("members:", s)
			last = s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}
`

// buildSnippet builds code, statements that must be gofmt'd, in the harness, as a program of
// a module of its own that requires this repository, and returns the binary's path. The
// snippet's /etc/corral/gossip/key becomes keyFile.
func buildSnippet(t *testing.T, code, keyFile string) string {
	t.Helper()
	t.Logf("the snippet:\n%s", code)
	body := "\t" + strings.ReplaceAll(strings.TrimRight(code, "\n"), "\n", "\n\t")
	body = strings.ReplaceAll(body, "\n\t\n", "\n\n")
	wrapped := "package p\n\nfunc _() {\n" + body + "\n}\n"
	formatted, err := format.Source([]byte(wrapped))
	if err != nil {
		t.Fatalf("the snippet does not parse: %v", err)
	}
	if string(formatted) != wrapped {
		t.Fatalf("the snippet is not gofmt'd; gofmt makes it:\n%s", formatted)
	}

	// The packages it names and the variables it declares.
	f, err := parser.ParseFile(token.NewFileSet(), "snippet.go", wrapped, 0)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]bool{"context": true, "fmt": true, "os": true, "os/signal": true,
		"strings": true, "syscall": true, "time": true, packages["corral"]: true}
	var declared []string
	body0 := f.Decls[0].(*ast.FuncDecl).Body
	for _, st := range body0.List {
		if as, ok := st.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" && !slices.Contains(declared, id.Name) {
					declared = append(declared, id.Name)
				}
			}
		}
	}
	var unknown []string
	ast.Inspect(body0, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && !slices.Contains(declared, x.Name) && x.Name != "db" {
				if path, ok := packages[x.Name]; ok {
					imports[path] = true
				} else if !slices.Contains(unknown, x.Name) {
					unknown = append(unknown, x.Name)
				}
			}
		}
		return true
	})
	if len(unknown) > 0 {
		t.Fatalf("the snippet names %v, neither its own variables nor a package of the harness's table", unknown)
	}
	if !slices.Contains(declared, "node") {
		t.Fatal("the snippet declares no node")
	}
	if strings.Contains(code, `"k8s://`) {
		imports[`_ "github.com/corralcache/corral/peer/k8s"`] = true
	}
	var imp, uses strings.Builder
	for _, p := range slices.Sorted(maps.Keys(imports)) {
		if strings.HasPrefix(p, "_ ") {
			fmt.Fprintf(&imp, "\t%s\n", p)
		} else {
			fmt.Fprintf(&imp, "\t%q\n", p)
		}
	}
	for _, v := range declared {
		fmt.Fprintf(&uses, "\t_ = %s\n", v)
	}
	src := fmt.Sprintf(harness, imp.String(), strings.ReplaceAll(body, "/etc/corral/gossip/key", keyFile), uses.String())

	dir := t.TempDir()
	gomod := fmt.Sprintf("module snippet\n\ngo 1.26\n\nrequire github.com/corralcache/corral v0.0.0\n\nreplace github.com/corralcache/corral => %s\n", repoRoot)
	sum, err := os.ReadFile(filepath.Join(repoRoot, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=mod lets go add the requirements main.go's imports need, from the repository's
	// module graph, checked against its go.sum. A module that depends on corral loads more of
	// that graph than corral's own build does (the go.mod files of dependencies written before
	// module graph pruning, such as go-immutable-radix's go-uuid v1.0.0), which a module cache
	// filled by the repository's builds alone lacks: go fetches them through GOPROXY.
	build := exec.Command("go", "build", "-mod=mod", "-o", "snippet", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the snippet: %v\n%s\nmain.go:\n%s", err, out, src)
	}
	return filepath.Join(dir, "snippet")
}

// runCopies runs three copies of prog, one per address of pods, each in a mount namespace
// whose /etc/hosts is hosts, and waits until each reports the three members; then it stops
// them all at once with SIGTERM, and each must exit 0.
func runCopies(t *testing.T, prog, hosts string, pods []string) {
	t.Helper()
	type copyOf struct {
		name    string
		cmd     *exec.Cmd
		mu      sync.Mutex
		members string // the last members line
		log     strings.Builder
		exited  chan struct{} // closed once the process has exited
		err     error         // its exit, set before exited is closed
	}
	var copies []*copyOf
	for i, ip := range pods {
		c := &copyOf{name: fmt.Sprintf("shop-%d", i), exited: make(chan struct{})}
		c.cmd = exec.Command("unshare", "--mount", "--propagation", "private", "--",
			"sh", "-c", `mount --bind "$0" /etc/hosts && exec "$1"`, hosts, prog)
		c.cmd.Env = append(os.Environ(), "POD_NAME="+c.name, "POD_IP="+ip)
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.cmd.Stderr = &lockedWriter{mu: &c.mu, w: &c.log}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				c.mu.Lock()
				fmt.Fprintln(&c.log, sc.Text())
				if m, ok := strings.CutPrefix(sc.Text(), "members: "); ok {
					c.members = m
				}
				c.mu.Unlock()
			}
			c.err = c.cmd.Wait()
			close(c.exited)
		}()
		t.Cleanup(func() {
			c.cmd.Process.Kill()
			<-c.exited
			if t.Failed() {
				c.mu.Lock()
				t.Logf("%s (%s):\n%s", c.name, ip, c.log.String())
				c.mu.Unlock()
			}
		})
		copies = append(copies, c)
	}
	// Three members: the names are the pods' (shop-0, …) where a snippet sets Name from
	// POD_NAME, hostname and a random suffix where it leaves it.
	deadline := time.Now().Add(time.Minute)
	for _, c := range copies {
		for {
			c.mu.Lock()
			got := c.members
			c.mu.Unlock()
			if strings.Count(got, ",") == len(pods)-1 {
				break
			}
			select {
			case <-c.exited:
				t.Fatalf("%s exited (%v) before it saw the cluster; its members: %q", c.name, c.err, got)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s sees %q after a minute, want %d members", c.name, got, len(pods))
			}
		}
	}
	for _, c := range copies {
		c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range copies {
		select {
		case <-c.exited:
			if c.err != nil {
				t.Errorf("%s exited with %v after SIGTERM, want 0", c.name, c.err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s still running 30s after SIGTERM", c.name)
		}
	}
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
