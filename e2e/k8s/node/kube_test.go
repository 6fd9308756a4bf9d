package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectl runs the kubectl binary against the node as admin, in namespace ns ("" = none), and
// returns its standard output.
func kubectl(t testing.TB, ns string, args ...string) string {
	t.Helper()
	out, err := kubectlErr(ns, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func kubectlErr(ns string, args ...string) (string, error) {
	return runTool("kubectl", ns, "", args...)
}

// kubectlIn is kubectl with a manifest on its standard input.
func kubectlIn(t testing.TB, ns, stdin string, args ...string) string {
	t.Helper()
	out, err := runTool("kubectl", ns, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// helm runs helm against the node.
func helm(t testing.TB, ns string, args ...string) string {
	t.Helper()
	out, err := runTool("helm", ns, "", args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func runTool(tool, ns, stdin string, args ...string) (string, error) {
	if ns != "" {
		args = append([]string{"--namespace", ns}, args...)
	}
	cmd := exec.Command(filepath.Join(nd.tools, tool), args...)
	cmd.Env = toolEnv()
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w\n%s%s", err, out, stderr.String())
	}
	return string(out), nil
}

func toolEnv() []string {
	return append(os.Environ(), "KUBECONFIG="+nd.kubeconfig(),
		"HELM_CACHE_HOME="+nd.path("helm", "cache"),
		"HELM_CONFIG_HOME="+nd.path("helm", "config"),
		"HELM_DATA_HOME="+nd.path("helm", "data"))
}

// waitFor polls cond until it holds or timeout passes, and fails the test then. A node process
// that died fails it at once: nothing the test waits for can happen without it.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if dead := nd.exited(); len(dead) > 0 {
			t.Fatalf("waiting for %s: %v exited:\n%s", what, dead, nd.logTail(dead[0], 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// newNamespace creates a namespace for one test, prints what a person needs when the test
// fails (events, pods, their logs, the kubelet's log), and deletes the namespace afterwards.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := nd.client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, name)
		}
		nd.client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	followLogs(t, name)
	return name
}

// dumpNamespace logs the namespace's state for a person reading a failure.
func dumpNamespace(t *testing.T, ns string) {
	t.Logf("=== namespace %s: pods\n%s", ns, quiet("kubectl", ns, "get", "pods", "-o", "wide"))
	t.Logf("=== namespace %s: events, oldest first\n%s", ns, quiet("kubectl", ns, "get", "events", "--sort-by", ".lastTimestamp"))
	pods, _ := nd.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	for _, p := range pods.Items {
		t.Logf("=== pod %s: log (last 80 lines)\n%s", p.Name, quiet("kubectl", ns, "logs", p.Name, "--all-containers", "--tail", "80"))
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				t.Logf("=== pod %s: previous container's log\n%s", p.Name, quiet("kubectl", ns, "logs", p.Name, "-c", cs.Name, "--previous", "--tail", "80"))
			}
		}
	}
	t.Logf("=== kubelet log (last 60 lines; all of it in testdata/out/logs/kubelet.log)\n%s", nd.logTail("kubelet", 60))
}

func quiet(tool, ns string, args ...string) string {
	out, err := runTool(tool, ns, "", args...)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return out
}

// pods lists the namespace's pods with the selector, not being deleted, sorted by name.
func pods(t testing.TB, ns, selector string) []corev1.Pod {
	t.Helper()
	l, err := nd.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list pods %s: %v", selector, err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// allPods is pods including those being deleted.
func allPods(t testing.TB, ns, selector string) []corev1.Pod {
	t.Helper()
	l, err := nd.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list pods %s: %v", selector, err)
	}
	return l.Items
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func names(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// httpc is the test's client to pods on the bridge.
var httpc = &http.Client{Timeout: 5 * time.Second}

// get GETs url and returns the status and body; 0 and the error's text when it fails.
func get(url string) (int, string) {
	resp, err := httpc.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var membersRE = regexp.MustCompile(`(?m)^corral_members(?:\{[^}]*\})? ([0-9.e+]+)$`)

// metricValue is the value of a metric line matched by re in a /metrics page, or -1.
func metricValue(page string, re *regexp.Regexp) float64 {
	m := re.FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// sumMetric adds the values of every line of the family name whose labels contain match.
func sumMetric(page, name, match string) float64 {
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// waitMembers waits until exactly want pods match selector, all Ready, none being deleted,
// and each one's corral_members (on its metrics port) says want: one cluster of want members.
func waitMembers(t testing.TB, ns, selector string, port, want int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var ps []corev1.Pod
	var last string
	deadline := time.Now().Add(timeout)
	for {
		ps = allPods(t, ns, selector)
		last = fmt.Sprintf("%d pods", len(ps))
		ok := len(ps) == want
		for _, p := range ps {
			if !ok {
				break
			}
			if p.DeletionTimestamp != nil || !podReady(p) {
				ok = false
				last = fmt.Sprintf("pod %s ready %v, deleting %v", p.Name, podReady(p), p.DeletionTimestamp != nil)
				break
			}
			code, page := get(fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, port))
			if v := metricValue(page, membersRE); code != 200 || int(v) != want {
				ok = false
				last = fmt.Sprintf("pod %s: /metrics %d, corral_members %v", p.Name, code, v)
			}
		}
		if ok {
			return ps
		}
		if dead := nd.exited(); len(dead) > 0 {
			t.Fatalf("waiting for %d members: %v exited:\n%s", want, dead, nd.logTail(dead[0], 40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster of %d Ready members of %s after %v: %s", want, selector, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// portForward runs kubectl port-forward to target's port and returns the local address; it
// ends with the test.
func portForward(t *testing.T, ns, target string, port int) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(nd.tools, "kubectl"), "--namespace", ns, "port-forward", "--address", "127.0.0.1", target, fmt.Sprintf(":%d", port))
	cmd.Env = toolEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// "Forwarding from 127.0.0.1:41234 -> 8080"
			if rest, ok := strings.CutPrefix(sc.Text(), "Forwarding from "); ok {
				select {
				case addr <- strings.Fields(rest)[0]:
				default:
				}
			}
		}
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward %s: no local port in 30s: %s", target, stderr.String())
		return ""
	}
}

// syncBuffer is a bytes buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder // guards b
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

// background runs a tool (kubectl drain, …) while the test goes on; wait returns its output
// and error once it ends.
type background struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

func startBackground(t *testing.T, tool, ns string, args ...string) *background {
	t.Helper()
	if ns != "" {
		args = append([]string{"--namespace", ns}, args...)
	}
	b := &background{cmd: exec.Command(filepath.Join(nd.tools, tool), args...), out: &syncBuffer{}, done: make(chan error, 1)}
	b.cmd.Env = toolEnv()
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	t.Cleanup(func() { b.cmd.Process.Kill(); <-b.done; b.done <- nil })
	return b
}

func (b *background) wait(t *testing.T, timeout time.Duration) string {
	t.Helper()
	select {
	case err := <-b.done:
		b.done <- err
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(b.cmd.Args, " "), err, b.out.String())
		}
		return b.out.String()
	case <-time.After(timeout):
		t.Fatalf("%s still running after %v:\n%s", strings.Join(b.cmd.Args, " "), timeout, b.out.String())
		return ""
	}
}

// jsonGet GETs url and decodes its JSON body into v.
func jsonGet(url string, v any) error {
	resp, err := httpc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
