// Command catalog is a small HTTP service that embeds corral: every replica is a member of one
// corral cluster, so a product read by any replica is loaded from the products API once in the
// whole cluster, however many replicas ask at once, and survives rollouts (a leaving replica
// hands its products to their new owners).
//
//	GET /products/{id}   the product, read through the cache (404 when the API has none);
//	                     X-Corral-Source says how it was found: fill, hit, peer, near, …
//	GET /metrics         Prometheus, corral's metrics included (the chart's http-metrics port)
//	GET /healthz         the process answers (liveness)
//	GET /readyz          ready to serve; fails as soon as SIGTERM arrives
//
// Every flag has a default from the environment, which is how it is configured on Kubernetes
// (kubernetes.yaml beside this file, with the chart in library mode); on a laptop, flags run
// three replicas on one machine (README.md):
//
//	-name         member name ($POD_NAME; "" = hostname + a random suffix)
//	-bind         address to gossip on and advertise ($POD_IP; "" = every interface)
//	-gossip-port  memberlist port, TCP and UDP ($CORRAL_GOSSIP_PORT, else 7946)
//	-peer-port    peer gRPC port ($CORRAL_PEER_PORT, else 7947)
//	-join         seeds, comma-separated ($CORRAL_JOIN): k8s://<release>-corral-headless, host:port, …
//	-label        cluster label ($CORRAL_LABEL): the chart's is <release>.<namespace>
//	-key-file     gossip key file ($CORRAL_SECRET_KEY_FILE; "" = plaintext gossip)
//	-http         HTTP address ($CATALOG_HTTP, else :8080)
//	-products     the products API's URL of one product, {id} replaced by the id ($PRODUCTS_URL;
//	              "" = the built-in demo products: made up, 50 ms each)
//	-shutdown-delay  after SIGTERM, how long to keep serving while endpoints drop the pod
//	              ($CATALOG_SHUTDOWN_DELAY, else 0; kubernetes.yaml sets 5s)
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corralcache/corral"
	_ "github.com/corralcache/corral/peer/k8s" // k8s:// seeds: the Service's EndpointSlices
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(ctx, os.Args[1:], os.Getenv, log, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		log.Error("catalog stopped", "err", err)
		os.Exit(1)
	}
}

// settings are the flags, with their defaults from the environment.
type settings struct {
	name, bind           string
	gossipPort, peerPort int
	join                 string
	label, keyFile, http string
	products             string
	shutdownDelay        time.Duration
}

func parse(args []string, getenv func(string) string) (settings, error) {
	var s settings
	d := corral.DefaultConfig()
	gossipPort, err := envInt(getenv, "CORRAL_GOSSIP_PORT", d.GossipPort)
	if err != nil {
		return s, err
	}
	peerPort, err := envInt(getenv, "CORRAL_PEER_PORT", d.PeerPort)
	if err != nil {
		return s, err
	}
	fs := flag.NewFlagSet("catalog", flag.ContinueOnError)
	fs.StringVar(&s.name, "name", getenv("POD_NAME"), "member name, unique in the cluster ($POD_NAME; \"\" = hostname + a random suffix)")
	fs.StringVar(&s.bind, "bind", getenv("POD_IP"), "address to gossip on and advertise ($POD_IP; \"\" = every interface)")
	fs.IntVar(&s.gossipPort, "gossip-port", gossipPort, "memberlist port, TCP and UDP ($CORRAL_GOSSIP_PORT)")
	fs.IntVar(&s.peerPort, "peer-port", peerPort, "peer gRPC port ($CORRAL_PEER_PORT)")
	fs.StringVar(&s.join, "join", getenv("CORRAL_JOIN"), "seeds, comma-separated: k8s://<release>-corral-headless, dns+name:port, host:port ($CORRAL_JOIN)")
	fs.StringVar(&s.label, "label", getenv("CORRAL_LABEL"), "cluster label; the chart's is <release>.<namespace> ($CORRAL_LABEL)")
	fs.StringVar(&s.keyFile, "key-file", getenv("CORRAL_SECRET_KEY_FILE"), "gossip key file, one key or a rotation's list ($CORRAL_SECRET_KEY_FILE; \"\" = plaintext gossip)")
	fs.StringVar(&s.http, "http", cmp.Or(getenv("CATALOG_HTTP"), ":8080"), "HTTP address ($CATALOG_HTTP)")
	fs.StringVar(&s.products, "products", getenv("PRODUCTS_URL"), "products API URL of one product, {id} replaced by the id ($PRODUCTS_URL; \"\" = built-in demo products)")
	delay, err := time.ParseDuration(cmp.Or(getenv("CATALOG_SHUTDOWN_DELAY"), "0s"))
	if err != nil {
		return s, fmt.Errorf("CATALOG_SHUTDOWN_DELAY: %w", err)
	}
	fs.DurationVar(&s.shutdownDelay, "shutdown-delay", delay, "after SIGTERM, keep serving this long while endpoints drop the pod ($CATALOG_SHUTDOWN_DELAY)")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if s.products != "" && !strings.Contains(s.products, "{id}") {
		return s, fmt.Errorf("-products (PRODUCTS_URL) %q must contain {id}", s.products)
	}
	return s, nil
}

// envInt is the integer in the environment variable name, or def when it is unset.
func envInt(getenv func(string) string, name string, def int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not a port number", name, v)
	}
	return n, nil
}

// run is the service: it returns when ctx ends (SIGTERM), after a graceful stop. ready, if not
// nil, receives the HTTP address once the service listens (for tests).
func run(ctx context.Context, args []string, getenv func(string) string, log *slog.Logger, ready chan<- string) error {
	s, err := parse(args, getenv)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// The lines of the repository's README ("Use it"), with flags for the values the chart gives.
	cfg := corral.DefaultConfig()
	cfg.Name = s.name
	cfg.BindAddr = s.bind
	cfg.GossipPort, cfg.PeerPort = s.gossipPort, s.peerPort
	for _, seed := range strings.Split(s.join, ",") {
		if seed = strings.TrimSpace(seed); seed != "" {
			cfg.Join = append(cfg.Join, seed)
		}
	}
	cfg.Label = s.label
	if s.keyFile != "" {
		keys, err := os.ReadFile(s.keyFile)
		if err != nil {
			return err
		}
		// One key, or two on two lines while the chart's key rotates (the first one sends).
		if cfg.SecretKey, cfg.SecondaryKeys, err = corral.ParseSecretKeys(keys); err != nil {
			return fmt.Errorf("%s: %w", s.keyFile, err)
		}
	}
	cfg.Registerer = reg
	cfg.Logger = log
	node, err := corral.New(cfg)
	if err != nil {
		return err
	}

	loads := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "catalog_product_loads_total",
		Help: "Products this replica loaded from the products API (the sum over replicas is the API's load).",
	})
	reg.MustRegister(loads)
	var load corral.LoadFunc[[]byte]
	if s.products != "" {
		load = apiProducts(s.products, loads)
	} else {
		load = demoProducts(node.Name(), loads)
	}
	catalog, err := corral.NewGroup(node, "products", load, corral.WithTTL(time.Hour), corral.WithJitter(0.1))
	if err != nil {
		node.Close(context.Background())
		return err
	}

	var stopping atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}", func(w http.ResponseWriter, r *http.Request) {
		v, src, err := catalog.GetWithSource(r.Context(), r.PathValue("id"))
		switch {
		case errors.Is(err, corral.ErrNotFound):
			http.NotFound(w, r)
		case err != nil:
			log.Warn("product read failed", "id", r.PathValue("id"), "err", err)
			http.Error(w, "products API unavailable", http.StatusBadGateway)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Corral-Source", string(src))
			w.Write(v)
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if stopping.Load() {
			http.Error(w, "stopping", http.StatusServiceUnavailable)
		}
	})
	lis, err := net.Listen("tcp", s.http)
	if err != nil {
		node.Close(context.Background())
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	log.Info("catalog serving", "member", node.Name(), "http", lis.Addr().String(), "gossip", node.GossipAddr(),
		"join", cfg.Join, "products", cmp.Or(s.products, "built-in demo products"))
	if ready != nil {
		ready <- lis.Addr().String()
	}

	select {
	case err := <-served:
		node.Close(context.Background())
		return err
	case <-ctx.Done():
	}
	// Graceful stop: fail readiness, keep serving while the endpoint goes away, finish the
	// requests in flight, then leave the cluster and hand the cached products to their new
	// owners (Close), so that a rollout costs the products API nothing. The pod's
	// terminationGracePeriodSeconds (30 s in kubernetes.yaml) covers the delay and the 20 s.
	stopping.Store(true)
	select {
	case <-time.After(s.shutdownDelay):
	case err := <-served:
		return errors.Join(err, node.Close(context.Background()))
	}
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	<-served
	return node.Close(sctx)
}
