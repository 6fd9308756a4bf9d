package k8s

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/corralcache/corral/peer"
)

// Scheme is the seed scheme this package registers with package peer: "k8s://…".
const Scheme = "k8s"

func init() { peer.RegisterScheme(Scheme, Open) }

// Config configures New.
type Config struct {
	// Namespace is the Service's namespace. "" means this pod's: POD_NAMESPACE, else the
	// service account's namespace file; New fails when neither is there.
	Namespace string
	// Service is the name of the Service whose endpoints are the members. Required.
	Service string
	// Port is the gossip port to join on every address: a number, or the name of a port of the
	// Service. "" means the port named DefaultPortName in each EndpointSlice, or peer.DefaultPort
	// in a slice without one.
	Port string
	// AddressType picks the EndpointSlices of one IP family, discoveryv1.AddressTypeIPv4 or
	// AddressTypeIPv6. "" means the family of POD_IP when it is set (the address a member
	// advertises, so the addresses joined are the members' own), else both: a dual-stack pod
	// would then be joined at both of its addresses, one of which is never a member's.
	AddressType discoveryv1.AddressType
	// Client reads the Service's EndpointSlices, in Namespace: a typed client-go client
	// (clientset.DiscoveryV1().EndpointSlices(namespace)) will do. nil means a client of this
	// package's (see client.go) configured from the kubeconfig files that KUBECONFIG names when
	// it is set, else from the pod's in-cluster config (its service account's token, re-read as
	// it rotates).
	Client Client
}

// Client lists and watches the EndpointSlices of one namespace. Its methods are those of
// client-go's typed EndpointSliceInterface.
type Client interface {
	List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Discoverer watches one Service's EndpointSlices. It implements peer.Discoverer; Run may be
// called once at a time.
type Discoverer struct {
	namespace, service, port string
	family                   discoveryv1.AddressType // "" = both
	client                   Client
}

var _ peer.Discoverer = (*Discoverer)(nil)

// Open parses target ("namespace/service[:port]" or "service[:port]", see the package doc) and
// returns its Discoverer, with the default client. It is the function registered for "k8s".
func Open(target string) (peer.Discoverer, error) {
	c, err := parseTarget(target)
	if err != nil {
		return nil, err
	}
	d, err := New(c)
	if err != nil {
		return nil, err // not a nil *Discoverer in a non-nil interface
	}
	return d, nil
}

// New checks c and fills its defaults; it reads the namespace and the client's configuration
// files, but does not reach the API server (Run does).
func New(c Config) (*Discoverer, error) {
	if err := c.checkNames(); err != nil {
		return nil, err
	}
	if c.Namespace == "" {
		ns, err := podNamespace()
		if err != nil {
			return nil, err
		}
		c.Namespace = ns
	}
	switch c.AddressType {
	case "":
		if ip, err := netip.ParseAddr(os.Getenv("POD_IP")); err == nil {
			c.AddressType = discoveryv1.AddressTypeIPv4
			if ip.Unmap().Is6() {
				c.AddressType = discoveryv1.AddressTypeIPv6
			}
		}
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
	default:
		return nil, fmt.Errorf("address type %q: want IPv4 or IPv6", c.AddressType)
	}
	if c.Client == nil {
		rc, err := restConfig()
		if err != nil {
			return nil, err
		}
		cl, err := newRESTClient(rc, c.Namespace)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		c.Client = cl
	}
	return &Discoverer{namespace: c.Namespace, service: c.Service, port: c.Port, family: c.AddressType, client: c.Client}, nil
}

// restConfig is KUBECONFIG's configuration when it is set, else the in-cluster one.
func restConfig() (*rest.Config, error) {
	if os.Getenv("KUBECONFIG") != "" {
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("KUBECONFIG: %w", err)
		}
		return rc, nil
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster config (set KUBECONFIG outside a pod): %w", err)
	}
	return rc, nil
}

// String returns the seed, e.g. "k8s://default/corral".
func (d *Discoverer) String() string {
	s := Scheme + "://" + d.namespace + "/" + d.service
	if d.port != "" {
		s += ":" + d.port
	}
	return s
}

// Run lists the Service's EndpointSlices, then watches them until ctx ends, reporting the
// address set to update after the first list and after every change. It returns nil once ctx
// has ended and the informer's goroutines have stopped.
func (d *Discoverer) Run(ctx context.Context, log *slog.Logger, update func(addrs []string)) error {
	// client-go's own logs (klog's contextual logger) go where this package's go.
	ctx = klog.NewContext(ctx, logr.FromSlogHandler(log.Handler()))
	sel := labels.Set{discoveryv1.LabelServiceName: d.service}.String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return d.client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return d.client.Watch(ctx, o)
		},
	}
	// No resync: the informer's store is the truth, and every change reaches the handler. The
	// wrapper lets a client that cannot stream lists (client-go's fake) say so.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, d.client),
		&discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
	if err := inf.SetWatchErrorHandlerWithContext(d.watchError(log)); err != nil {
		return err
	}
	// One pending change is enough: the loop below reads the whole store each time.
	dirty := make(chan struct{}, 1)
	poke := func() {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { inf.RunWithContext(ctx) })
	select {
	case <-inf.HasSyncedChecker().Done():
	case <-ctx.Done():
		return nil
	}

	var last []string
	for first := true; ; first = false {
		var eps []*discoveryv1.EndpointSlice
		for _, o := range inf.GetStore().List() {
			if s, ok := o.(*discoveryv1.EndpointSlice); ok && s.Labels[discoveryv1.LabelServiceName] == d.service {
				eps = append(eps, s)
			}
		}
		addrs := addrsOf(eps, d.port, d.family)
		if first || !slices.Equal(addrs, last) {
			log.Info("k8s:// discovery: members' addresses", "service", d.namespace+"/"+d.service, "addrs", addrs)
			update(addrs)
			last = addrs
		}
		select {
		case <-dirty:
		case <-ctx.Done():
			return nil
		}
	}
}

// watchError logs a failed list or watch, which the informer retries with backoff.
func (d *Discoverer) watchError(log *slog.Logger) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, _ *cache.Reflector, err error) {
		switch {
		case ctx.Err() != nil:
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			log.Debug("k8s:// discovery: EndpointSlice watch restarts", "err", err)
		case apierrors.IsForbidden(err):
			log.Warn("k8s:// discovery: reading EndpointSlices is forbidden; the pod's service account needs get, list and watch on endpointslices (discovery.k8s.io) in namespace "+d.namespace+" (a Role, as the chart makes)", "err", err)
		default:
			log.Warn("k8s:// discovery: EndpointSlice list or watch failed; retrying", "err", err)
		}
	}
}
