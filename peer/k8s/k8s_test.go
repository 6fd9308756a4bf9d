package k8s

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"

	"github.com/corralcache/corral/internal/leakcheck"
	"github.com/corralcache/corral/peer"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in                 string
		ns, svc, port, bad string
	}{
		{in: "default/corral", ns: "default", svc: "corral"},
		{in: "corral", svc: "corral"},
		{in: "team-a/corral-headless:7946", ns: "team-a", svc: "corral-headless", port: "7946"},
		{in: "corral:tcp-gossip", svc: "corral", port: "tcp-gossip"},
		{in: "", bad: "service name is required"},
		{in: "/corral", bad: "empty namespace"},
		{in: "default/", bad: "service name is required"},
		{in: "default/Corral", bad: `service "Corral"`},
		{in: "a/b/c", bad: `service "b/c"`},
		{in: "Default/corral", bad: `namespace "Default"`},
		{in: "corral:", bad: "empty port"},
		{in: "corral:0", bad: "port 0"},
		{in: "corral:70000", bad: "port 70000"},
		{in: "corral:not_a_port", bad: `port name "not_a_port"`},
	}
	for _, tt := range tests {
		c, err := parseTarget(tt.in)
		switch {
		case tt.bad != "":
			if err == nil || !strings.Contains(err.Error(), tt.bad) {
				t.Errorf("parseTarget(%q) = %+v, %v; want an error saying %q", tt.in, c, err, tt.bad)
			}
		case err != nil:
			t.Errorf("parseTarget(%q): %v", tt.in, err)
		case c.Namespace != tt.ns || c.Service != tt.svc || c.Port != tt.port:
			t.Errorf("parseTarget(%q) = %+v, want ns %q svc %q port %q", tt.in, c, tt.ns, tt.svc, tt.port)
		}
	}
}

// slice builds an EndpointSlice of service; ports as name=number pairs, endpoints as
// addresses, a "!" suffix marking one not ready and a "~" suffix one terminating.
func slice(name, service string, family discoveryv1.AddressType, ports map[string]int32, endpoints ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: family,
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: new(n), Port: new(p), Protocol: new(corev1.ProtocolTCP)})
	}
	for _, e := range endpoints {
		ready, terminating := true, false
		if a, ok := strings.CutSuffix(e, "!"); ok {
			e, ready = a, false
		}
		if a, ok := strings.CutSuffix(e, "~"); ok {
			e, ready, terminating = a, false, true
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: &terminating}})
	}
	return s
}

func TestAddrsOf(t *testing.T) {
	gossip := map[string]int32{"tcp-gossip": 7000, "grpc-peer": 7947}
	v4a := slice("a", "svc", discoveryv1.AddressTypeIPv4, gossip, "10.0.0.2", "10.0.0.1!", "10.0.0.9~")
	v4b := slice("b", "svc", discoveryv1.AddressTypeIPv4, gossip, "10.0.0.3", "10.0.0.2") // 10.0.0.2 in two slices
	v6 := slice("c", "svc", discoveryv1.AddressTypeIPv6, gossip, "fd00::1")
	fqdn := slice("d", "svc", discoveryv1.AddressTypeFQDN, gossip, "corral-0.example")
	unnamed := slice("e", "svc", discoveryv1.AddressTypeIPv4, map[string]int32{"other": 1}, "10.0.1.1")
	all := []*discoveryv1.EndpointSlice{v4a, v4b, v6, fqdn, unnamed}

	tests := []struct {
		port   string
		family discoveryv1.AddressType
		want   []string
	}{
		// The slices' tcp-gossip port; the slice without one falls back to 7946.
		{"", "", []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000", "10.0.1.1:7946", "[fd00::1]:7000"}},
		{"7946", "", []string{"10.0.0.1:7946", "10.0.0.2:7946", "10.0.0.3:7946", "10.0.1.1:7946", "[fd00::1]:7946"}},
		// A named port: slices without it are skipped.
		{"grpc-peer", "", []string{"10.0.0.1:7947", "10.0.0.2:7947", "10.0.0.3:7947", "[fd00::1]:7947"}},
		{"nope", "", nil},
		// One family of a dual-stack Service.
		{"", discoveryv1.AddressTypeIPv6, []string{"[fd00::1]:7000"}},
		{"", discoveryv1.AddressTypeIPv4, []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000", "10.0.1.1:7946"}},
	}
	for _, tt := range tests {
		if got := addrsOf(all, tt.port, tt.family); !slices.Equal(got, tt.want) {
			t.Errorf("addrsOf(port %q, family %q) = %v, want %v", tt.port, tt.family, got, tt.want)
		}
	}
}

// fakeClient serves the EndpointSlices of namespace ns from client-go's fake clientset, and tells
// the informer (with the clientset's IsWatchListSemanticsUnSupported) that it cannot stream
// lists.
type fakeClient struct{ *fake.Clientset }

var _ Client = fakeClient{}

func (c fakeClient) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return c.DiscoveryV1().EndpointSlices("ns").List(ctx, opts)
}

func (c fakeClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.DiscoveryV1().EndpointSlices("ns").Watch(ctx, opts)
}

// A typed client-go client is a Client.
var _ Client = discoveryclient.EndpointSliceInterface(nil)

// updates records what Run reports.
type updates struct {
	mu  sync.Mutex
	all [][]string
}

func (u *updates) update(addrs []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.all = append(u.all, addrs)
}

func (u *updates) last() ([]string, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.all) == 0 {
		return nil, 0
	}
	return u.all[len(u.all)-1], len(u.all)
}

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Run reports the addresses of every slice of the Service after its first list, and again after
// a slice is added, changed or deleted; slices of other Services never count, and a change that
// leaves the address set as it was reports nothing.
func TestRunFollowsEndpointSlices(t *testing.T) {
	gossip := map[string]int32{"tcp-gossip": 7946}
	cs := fake.NewClientset(
		slice("svc-1", "svc", discoveryv1.AddressTypeIPv4, gossip, "10.0.0.1"),
		slice("other-1", "other", discoveryv1.AddressTypeIPv4, gossip, "10.9.9.9"),
	)
	d, err := New(Config{Namespace: "ns", Service: "svc", Client: fakeClient{cs}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	u := &updates{}
	go func() { done <- d.Run(ctx, slog.New(slog.DiscardHandler), u.update) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v after ctx ended", err)
		}
	}()
	expect := func(what string, want ...string) int {
		t.Helper()
		var n int
		waitFor(t, what, func() bool {
			var got []string
			got, n = u.last()
			return n > 0 && slices.Equal(got, want)
		})
		return n
	}
	expect("the first list", "10.0.0.1:7946")

	api := cs.DiscoveryV1().EndpointSlices("ns")
	bg := context.Background()
	if _, err := api.Create(bg, slice("svc-2", "svc", discoveryv1.AddressTypeIPv4, gossip, "10.0.0.2!"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("a second slice with a not-ready endpoint", "10.0.0.1:7946", "10.0.0.2:7946")

	if _, err := api.Create(bg, slice("other-2", "other", discoveryv1.AddressTypeIPv4, gossip, "10.9.9.8"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Update(bg, slice("svc-1", "svc", discoveryv1.AddressTypeIPv4, gossip, "10.0.0.1", "10.0.0.3~"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Neither changes the set (another Service; a terminating endpoint); the deletion then does.
	n := expect("the update", "10.0.0.1:7946", "10.0.0.2:7946")
	if err := api.Delete(bg, "svc-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := expect("the deletion", "10.0.0.2:7946"); m != n+1 {
		t.Errorf("%d reports between the second slice and the deletion, want none: a change of no address was reported", m-n-1)
	}
}

// Members whose seed is a Service find each other through its EndpointSlices, and a member added
// to the slices later is joined without waiting for the re-join interval.
func TestMembersJoinThroughEndpointSlices(t *testing.T) {
	cs := fake.NewClientset()
	scheme := "fake-k8s"
	peer.RegisterScheme(scheme, func(target string) (peer.Discoverer, error) {
		c, err := parseTarget(target)
		if err != nil {
			return nil, err
		}
		c.Client = fakeClient{cs}
		return New(c)
	})
	t.Cleanup(func() { peer.RegisterScheme(scheme, nil) })

	newMember := func(name string, seeds ...string) *peer.Membership {
		cfg := peer.Config{Name: name, BindAddr: "127.0.0.1", Seeds: seeds, Meta: peer.Meta{PeerAddr: "127.0.0.1:1"},
			GossipInterval: 20 * time.Millisecond, ProbeInterval: 100 * time.Millisecond, ProbeTimeout: 50 * time.Millisecond,
			PushPullInterval: time.Second, JoinTimeout: 2 * time.Second, RejoinInterval: time.Hour}
		m, err := peer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	// Each member on its own port of 127.0.0.1, so each gets a slice of its own with that port.
	publish := func(name string, m *peer.Membership) {
		host, port, _ := strings.Cut(m.GossipAddr(), ":")
		var p int32
		for _, c := range port {
			p = p*10 + c - '0'
		}
		s := slice(name, "corral", discoveryv1.AddressTypeIPv4, map[string]int32{"tcp-gossip": p}, host)
		if _, err := cs.DiscoveryV1().EndpointSlices("ns").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seed := scheme + "://ns/corral"
	a := newMember("a", seed)
	publish("a", a)
	b := newMember("b", seed)
	publish("b", b)
	c := newMember("c") // no seed: only a discovery can bring it in
	publish("c", c)
	for _, m := range []*peer.Membership{a, b, c} {
		waitFor(t, m.String()+" to see a, b and c", func() bool { return len(m.Members()) == 3 })
	}
}

// Open takes its namespace from POD_NAMESPACE and its client from KUBECONFIG; without either it
// fails with a reason, and it never reaches the API server.
func TestOpenDefaults(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("POD_NAMESPACE", "team-a")
	d, err := Open("corral")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.(*Discoverer).String(); got != "k8s://team-a/corral" {
		t.Errorf("Open(corral) = %s, want k8s://team-a/corral", got)
	}
	if f := d.(*Discoverer).family; f != "" {
		t.Errorf("family %q without POD_IP, want both", f)
	}
	for ip, want := range map[string]discoveryv1.AddressType{"10.1.2.3": discoveryv1.AddressTypeIPv4, "fd00::7": discoveryv1.AddressTypeIPv6} {
		t.Setenv("POD_IP", ip)
		if d, err := Open("corral"); err != nil || d.(*Discoverer).family != want {
			t.Errorf("POD_IP=%s: family %v (%v), want %s", ip, d, err, want)
		}
	}
	t.Setenv("POD_IP", "")

	t.Setenv("POD_NAMESPACE", "")
	if _, err := os.Stat(serviceAccountNamespace); err != nil {
		if _, err := Open("corral"); err == nil || !strings.Contains(err.Error(), "POD_NAMESPACE") {
			t.Errorf("Open(corral) with no namespace = %v, want an error naming POD_NAMESPACE", err)
		}
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	if _, err := Open("ns/corral"); err == nil {
		t.Error("Open with a missing kubeconfig succeeded")
	}
}

// An application that imports only the root package must not link client-go: package peer
// knows k8s:// only through RegisterScheme.
func TestRootPackageLinksNoClientGo(t *testing.T) {
	for _, pkg := range []string{"github.com/corralcache/corral", "github.com/corralcache/corral/peer"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "k8s.io/") || dep == "github.com/corralcache/corral/peer/k8s" {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}

// flakyClient breaks the watch as an API server does: its first watch ends (a reconnect), its
// second fails with "resource version too old" after a slice was created that no watch saw, so
// only a fresh list can find it.
type flakyClient struct {
	fakeClient
	watches, lists atomic.Int32
	first          chan watch.Interface // the first watch, for the test to stop
}

func (c *flakyClient) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	c.lists.Add(1)
	return c.fakeClient.List(ctx, opts)
}

func (c *flakyClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	switch c.watches.Add(1) {
	case 1:
		w, err := c.fakeClient.Watch(ctx, opts)
		if err == nil {
			c.first <- w
		}
		return w, err
	case 2:
		gap := slice("svc-gap", "svc", discoveryv1.AddressTypeIPv4, map[string]int32{"tcp-gossip": 7946}, "10.0.0.9")
		if _, err := c.DiscoveryV1().EndpointSlices("ns").Create(ctx, gap, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		return nil, apierrors.NewResourceExpired("too old resource version")
	}
	return c.fakeClient.Watch(ctx, opts)
}

// A watch that ends is resumed, and one refused as too old is followed by a new list, which
// finds what changed while no watch was open.
func TestRunSurvivesBrokenWatches(t *testing.T) {
	gossip := map[string]int32{"tcp-gossip": 7946}
	c := &flakyClient{fakeClient: fakeClient{fake.NewClientset(slice("svc-1", "svc", discoveryv1.AddressTypeIPv4, gossip, "10.0.0.1"))},
		first: make(chan watch.Interface, 1)}
	d, err := New(Config{Namespace: "ns", Service: "svc", Client: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	u := &updates{}
	go func() { done <- d.Run(ctx, slog.New(slog.DiscardHandler), u.update) }()
	defer func() { cancel(); <-done }()

	(<-c.first).Stop() // the connection drops
	waitFor(t, "a list after the expired watch", func() bool { return c.lists.Load() >= 2 })
	waitFor(t, "the slice created while no watch was open", func() bool {
		got, _ := u.last()
		return slices.Equal(got, []string{"10.0.0.1:7946", "10.0.0.9:7946"})
	})
	// And the watch that follows works.
	if _, err := c.DiscoveryV1().EndpointSlices("ns").Create(context.Background(),
		slice("svc-2", "svc", discoveryv1.AddressTypeIPv4, gossip, "10.0.0.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a slice created after the new watch", func() bool {
		got, _ := u.last()
		return slices.Equal(got, []string{"10.0.0.1:7946", "10.0.0.2:7946", "10.0.0.9:7946"})
	})
}
