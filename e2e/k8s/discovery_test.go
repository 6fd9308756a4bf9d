package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corralcache/corral/e2e/k8s/internal/kubetest"
)

// k8s:// for real: the chart's headless Service, service account and Role; Pod objects that
// this test, acting as their kubelet, gives the addresses of corral containers on a Docker
// network (Ready as each container's /readyz says); EndpointSlices written by Kubernetes' own
// endpointslice controller; and containers that run `corral serve --join k8s://ns/svc` with a
// kubeconfig holding a TokenRequest token of the chart's service account.
func TestK8sDiscovery(t *testing.T) {
	needDocker(t)
	image := "corral:e2e-k8s"
	start := time.Now()
	if out, err := exec.Command("make", "-C", repoRoot, "image", "IMAGE="+image).CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Logf("make image: %v", time.Since(start).Round(time.Millisecond))

	ns := createNamespace(t, "disco")
	applyStrict(t, render(t, "shop", ns, writeValues(t, "mode: library\nlibrary: {selector: {app: disco}}\ndiscovery: {mode: k8s}\n")))
	const svc, sa = "shop-corral-headless", "shop-corral"
	label := "shop." + ns
	ctx := context.Background()
	secret, err := cp.client.CoreV1().Secrets(ns).Get(ctx, "shop-corral-gossip", getOpts)
	if err != nil {
		t.Fatal(err)
	}

	org := startOrigin(t, cp.host)
	k := &kubelet{t: t, ns: ns, pods: map[string]*node{}}
	k.start()
	run := func(name, join string, minMembers int) *node {
		t.Helper()
		return k.run(name, image, sa, secret.Data["key"], "serve",
			"--join", join, "--label", label, "--secret-key-file", "/kube/key",
			"--origin", "http://"+org.addr+"/items/{key}", "--ttl", "1m", "--jitter", "0",
			"--min-members", fmt.Sprint(minMembers), "--drain", "300ms", "--shutdown-timeout", "10s")
	}

	seed := "k8s://" + ns + "/" + svc
	p0, p1, p2 := run("p0", seed, 1), run("p1", seed, 1), run("p2", seed, 1)
	waitViews(t, []*node{p0, p1, p2}, "p0", "p1", "p2")
	t.Logf("three containers formed one cluster through k8s:// in %v", time.Since(start).Round(time.Millisecond))
	// Through the slices Kubernetes' controller wrote, which each member read with its token.
	l, err := cp.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil || len(l.Items) == 0 {
		t.Fatalf("EndpointSlices of %s: %v, %v", svc, l, err)
	}
	for _, s := range l.Items {
		if by := s.Labels[discoveryv1.LabelManagedBy]; by != "endpointslice-controller.k8s.io" {
			t.Errorf("EndpointSlice %s managed by %q, want Kubernetes' endpointslice controller", s.Name, by)
		}
	}
	for _, n := range []*node{p0, p1, p2} {
		if logs := n.logs(t); !strings.Contains(logs, "k8s:// discovery: members' addresses") {
			t.Errorf("%s never logged the addresses its k8s:// seed found:\n%s", n.name, logs)
		}
	}

	// A stampede on a cold key across the three: one origin call.
	const callers = 20
	var wg sync.WaitGroup
	var failed atomic.Int32
	for _, n := range []*node{p0, p1, p2} {
		for range callers {
			wg.Go(func() {
				code, body := n.get("/v1/groups/items/keys/hot")
				if code != 200 || body != "value of hot" {
					failed.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d stampede requests failed", f, 3*callers)
	}
	if n := org.count("hot"); n != 1 {
		t.Errorf("a stampede of %d requests on 3 members cost %d origin calls, want 1", 3*callers, n)
	}

	// A pod that is not ready (it waits for 10 members) is published all the same, with serving
	// false, and joins.
	p3 := run("p3", seed, 10)
	waitViews(t, []*node{p0, p1, p2, p3}, "p0", "p1", "p2", "p3")
	if ready, err := k.podReady("p3"); err != nil || ready {
		t.Errorf("pod p3 ready %v (%v), want not ready", ready, err)
	}
	waitFor(t, "p3's endpoint published with serving false", 30*time.Second, func() bool {
		e, ok := endpointOf(t, ns, svc, p3.ip)
		return ok && e.Conditions.Serving != nil && !*e.Conditions.Serving
	})

	// Keys stored on every member, so the leaving one hands some off.
	for i := range 30 {
		if code, _ := p0.do("PUT", fmt.Sprintf("/v1/groups/items/keys/k%d", i), "v"); code != 204 {
			t.Fatalf("PUT k%d = %d", i, code)
		}
	}

	// Deleting p1 (grace 0: there is no kubelet to finish a graceful deletion) and stopping its
	// container shrinks every view, and the Service's endpoints.
	k.delete("p1")
	waitViews(t, []*node{p0, p2, p3}, "p0", "p2", "p3")
	waitFor(t, "p1's endpoint gone", 30*time.Second, func() bool { _, ok := endpointOf(t, ns, svc, p1.ip); return !ok })

	// A new pod grows every view; it names the Service alone, in its namespace (POD_NAMESPACE).
	p4 := run("p4", "k8s://"+svc, 1)
	waitViews(t, []*node{p0, p2, p3, p4}, "p0", "p2", "p3", "p4")

	// The chart's PromQL names only metrics that these real members export.
	exported := map[string]bool{}
	okCode := false // CorralPeerErrors counts code!="OK": the label must read so
	for _, n := range []*node{p0, p2, p3, p4} {
		_, body := n.get("/metrics")
		okCode = okCode || strings.Contains(body, `corral_peer_requests_total{code="OK",`)
		for _, line := range strings.Split(body, "\n") {
			if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
				exported[strings.Fields(name)[0]] = true
			}
		}
	}
	if !okCode {
		t.Error(`no member counts a successful peer request as corral_peer_requests_total{code="OK"}`)
	}
	for _, name := range chartMetricNames(t) {
		if !exported[name] {
			t.Errorf("the chart's PromQL uses %s, which no member exports", name)
		}
	}
}

// node is a corral container registered as a Pod.
type node struct {
	name, id, ip string
	http         *http.Client
}

func (n *node) do(method, path, body string) (int, string) {
	req, _ := http.NewRequest(method, "http://"+n.ip+":8080"+path, strings.NewReader(body))
	resp, err := n.http.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (n *node) get(path string) (int, string) { return n.do("GET", path, "") }

func (n *node) logs(t *testing.T) string {
	out, err := exec.Command("docker", "logs", n.id).CombinedOutput()
	if err != nil {
		t.Fatalf("docker logs %s: %v", n.name, err)
	}
	return string(out)
}

// members is the names in n's view, or nil when it does not answer.
func (n *node) members() []string {
	code, body := n.get("/v1/cluster")
	if code != 200 {
		return nil
	}
	var v struct {
		Members []struct{ Name string } `json:"members"`
	}
	if json.Unmarshal([]byte(body), &v) != nil {
		return nil
	}
	var names []string
	for _, m := range v.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

func waitViews(t *testing.T, nodes []*node, want ...string) {
	t.Helper()
	for _, n := range nodes {
		var last []string
		deadline := time.Now().Add(60 * time.Second)
		for last = n.members(); !slices.Equal(last, want); last = n.members() {
			if time.Now().After(deadline) {
				t.Fatalf("%s sees %v after 60s, want %v", n.name, last, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// kubelet starts the containers of Pods it creates, and writes their status: the container's
// address, and Ready as its /readyz says.
type kubelet struct {
	t      *testing.T
	ns     string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	pods map[string]*node // guards pods
}

func (k *kubelet) start() {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			k.mu.Lock()
			pods := make([]*node, 0, len(k.pods))
			for _, n := range k.pods {
				pods = append(pods, n)
			}
			k.mu.Unlock()
			for _, n := range pods {
				code, _ := n.get("/readyz")
				k.syncStatus(ctx, n, code == 200)
			}
		}
	})
	k.t.Cleanup(func() { k.cancel(); k.wg.Wait() })
}

// syncStatus writes the Pod's status when it differs from what the container says.
func (k *kubelet) syncStatus(ctx context.Context, n *node, ready bool) {
	pods := cp.client.CoreV1().Pods(k.ns)
	pod, err := pods.Get(ctx, n.name, getOpts)
	if err != nil || pod.DeletionTimestamp != nil {
		return
	}
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	if pod.Status.PodIP == n.ip && podConditionIs(pod, corev1.PodReady, cond) {
		return
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: n.ip, PodIPs: []corev1.PodIP{{IP: n.ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: cond, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: cond, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "corral", Ready: ready, Image: pod.Spec.Containers[0].Image,
			ContainerID: "docker://" + n.id, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
	}
	if _, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
		k.t.Logf("kubelet: status of %s: %v", n.name, err)
	}
}

func podConditionIs(pod *corev1.Pod, typ corev1.PodConditionType, s corev1.ConditionStatus) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c.Status == s
		}
	}
	return false
}

func (k *kubelet) podReady(name string) (bool, error) {
	pod, err := cp.client.CoreV1().Pods(k.ns).Get(context.Background(), name, getOpts)
	if err != nil {
		return false, err
	}
	return podConditionIs(pod, corev1.PodReady, corev1.ConditionTrue), nil
}

// run creates the Pod name and starts its container: image with args, KUBECONFIG holding a
// token the API server issued for the Pod's service account (bound to the Pod, so it dies with
// it), POD_NAME and POD_NAMESPACE as the Downward API would set them, and the gossip key.
func (k *kubelet) run(name, image, serviceAccount string, key []byte, args ...string) *node {
	t := k.t
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Labels: map[string]string{"app": "disco"}},
		Spec: corev1.PodSpec{ServiceAccountName: serviceAccount,
			Containers: []corev1.Container{{Name: "corral", Image: image, Args: args}}},
	}
	pod, err := cp.client.CoreV1().Pods(k.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	expiry := int64(3600)
	tr, err := cp.client.CoreV1().ServiceAccounts(k.ns).CreateToken(ctx, serviceAccount, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &expiry,
			BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", name, err)
	}
	dir := t.TempDir()
	// Readable by the image's non-root user; the token is a test's, bound to a test Pod.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), kubetest.Kubeconfig(cp.server(), cp.caPEM, tr.Status.Token, k.ns), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key"), key, 0o644); err != nil {
		t.Fatal(err)
	}
	dargs := []string{"run", "-d", "--label", dockerLabel, "--label", ownerLabel, "--name", fmt.Sprintf("%s-%s", dockerNet, name), "--network", dockerNet,
		"-v", dir + ":/kube:ro", "-e", "KUBECONFIG=/kube/config", "-e", "POD_NAMESPACE=" + k.ns, "-e", "POD_NAME=" + name,
		image}
	out, err := exec.Command("docker", append(dargs, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run %s: %v\n%s", name, err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "60", id).CombinedOutput()
			t.Logf("logs of %s:\n%s", name, logs)
		}
		exec.Command("docker", "rm", "-f", id).Run()
	})
	ip, err := exec.Command("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id).Output()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, id: id, ip: strings.TrimSpace(string(ip)),
		http: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	t.Cleanup(n.http.CloseIdleConnections)
	k.mu.Lock()
	k.pods[name] = n
	k.mu.Unlock()
	return n
}

// delete deletes the Pod at once and stops its container, as a kubelet would: SIGTERM, so it
// leaves and hands its keys off.
func (k *kubelet) delete(name string) {
	k.t.Helper()
	k.mu.Lock()
	n := k.pods[name]
	delete(k.pods, name)
	k.mu.Unlock()
	zero := int64(0)
	if err := cp.client.CoreV1().Pods(k.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		k.t.Fatal(err)
	}
	if out, err := exec.Command("docker", "stop", "-t", "15", n.id).CombinedOutput(); err != nil {
		k.t.Fatalf("docker stop %s: %v\n%s", name, err, out)
	}
}

// endpointOf finds ip among the Service's EndpointSlices.
func endpointOf(t *testing.T, ns, svc, ip string) (discoveryv1.Endpoint, bool) {
	l, err := cp.client.DiscoveryV1().EndpointSlices(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if slices.Contains(e.Addresses, ip) {
				return e, true
			}
		}
	}
	return discoveryv1.Endpoint{}, false
}

// origin is a slow HTTP origin on the host that counts its calls per key.
type origin struct {
	addr string
	mu   sync.Mutex
	hits map[string]int // guards hits
}

func startOrigin(t *testing.T, host string) *origin {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	o := &origin{addr: l.Addr().String(), hits: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.URL.Path, "/items/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		o.mu.Lock()
		o.hits[key]++
		o.mu.Unlock()
		time.Sleep(100 * time.Millisecond) // slow enough that the stampede overlaps
		io.WriteString(w, "value of "+key)
	})}
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return o
}

func (o *origin) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[key]
}
