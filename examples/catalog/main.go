// Command catalog is a small HTTP service that embeds corral: every replica of its Deployment
// is a member of one corral cluster, so a product read by any replica is loaded from the
// products API once in the whole cluster, however many replicas ask at once, and survives
// rollouts (a leaving replica hands its products to their new owners).
//
//	GET /products/{id}   the product, read through the cache (404 when the API has none)
//	GET /metrics         Prometheus, corral's metrics included (the chart's http-metrics port)
//	GET /healthz         the process answers (liveness)
//	GET /readyz          ready to serve; fails as soon as SIGTERM arrives
//
// It is deployed with the chart in library mode, which adds the headless Service the replicas
// find each other through, the gossip key Secret, the RBAC of k8s:// discovery and a
// PodDisruptionBudget: see kubernetes.yaml beside this file. Configuration, from the
// environment:
//
//	PRODUCTS_URL   the API's URL of one product, {id} replaced by the id
//	CORRAL_JOIN    k8s://<release>-corral-headless (the chart's headless Service)
//	CORRAL_LABEL   <release>.<namespace> (the chart's cluster label)
//	POD_NAME, POD_IP, POD_NAMESPACE from the Downward API
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
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

const (
	keyFile = "/etc/corral/gossip/key" // the chart's Secret, mounted whole (rotation reaches it)
	// After SIGTERM the pod keeps serving this long while its endpoint is removed everywhere
	// (kube-proxy, other clients), then leaves; the pod's terminationGracePeriodSeconds (30 s
	// by default) covers this, the hand-off and the drain.
	shutdownDelay = 5 * time.Second
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("catalog stopped", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	products := os.Getenv("PRODUCTS_URL")
	if !strings.Contains(products, "{id}") {
		return errors.New("PRODUCTS_URL must contain {id}")
	}
	keys, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	primary, older, err := corral.ParseSecretKeys(keys)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	cfg := corral.DefaultConfig() // gossip on 7946, peer gRPC on 7947: the chart's ports
	cfg.Name = os.Getenv("POD_NAME")
	cfg.AdvertiseAddr = os.Getenv("POD_IP")
	cfg.Join = []string{os.Getenv("CORRAL_JOIN")}
	cfg.Label = os.Getenv("CORRAL_LABEL")
	cfg.SecretKey = primary
	cfg.Registerer = reg
	cfg.Logger = log
	node, err := corral.New(cfg)
	if err != nil {
		return err
	}
	if len(older) > 0 { // a key rotation in progress: accept the older keys too
		if err := node.SetSecretKeys(primary, older...); err != nil {
			return err
		}
	}

	client := &http.Client{Timeout: 5 * time.Second}
	catalog, err := corral.NewGroup(node, "products", func(ctx context.Context, id string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", strings.ReplaceAll(products, "{id}", url.PathEscape(id)), nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound:
			return nil, corral.ErrNotFound
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("products API: %s", resp.Status)
		}
		return io.ReadAll(resp.Body)
	}, corral.WithTTL(time.Hour), corral.WithJitter(0.1))
	if err != nil {
		return err
	}

	var stopping atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}", func(w http.ResponseWriter, r *http.Request) {
		v, err := catalog.Get(r.Context(), r.PathValue("id"))
		switch {
		case errors.Is(err, corral.ErrNotFound):
			http.NotFound(w, r)
		case err != nil:
			log.Warn("product read failed", "id", r.PathValue("id"), "err", err)
			http.Error(w, "products API unavailable", http.StatusBadGateway)
		default:
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
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	log.Info("catalog serving", "member", node.Name(), "join", cfg.Join)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case err := <-served:
		node.Close(context.Background())
		return err
	case <-ctx.Done():
	}
	// Graceful stop: fail readiness, keep serving while the endpoint goes away, finish the
	// requests in flight, then leave the cluster and hand the cached products to their new
	// owners (Close), so that a rollout costs the products API nothing.
	stopping.Store(true)
	time.Sleep(shutdownDelay)
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	return node.Close(sctx)
}
