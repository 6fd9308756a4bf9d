package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
)

// apiProducts loads a product from the products API: GET template with {id} replaced by the
// path-escaped id; 200 is the product, 404 corral.ErrNotFound (remembered like a value), anything
// else an error (nothing is stored, the next read tries again).
func apiProducts(template string, loads prometheus.Counter) corral.LoadFunc[[]byte] {
	client := &http.Client{Timeout: 5 * time.Second}
	return func(ctx context.Context, id string) ([]byte, error) {
		loads.Inc()
		req, err := http.NewRequestWithContext(ctx, "GET", strings.ReplaceAll(template, "{id}", url.PathEscape(id)), nil)
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
		return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	}
}

// demoLatency is how long a demo product takes to load: long enough that replicas asking at
// once overlap, and the cache's one load per product shows.
const demoLatency = 50 * time.Millisecond

// demoProduct is what the built-in demo products API answers. LoadedBy names the replica whose
// loader made it: the product's owner in the cluster, whichever replica was asked.
type demoProduct struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	PriceCents int       `json:"price_cents"`
	LoadedBy   string    `json:"loaded_by"`
	LoadedAt   time.Time `json:"loaded_at"`
}

// demoProducts loads made-up products, for trying the catalog without a products API: every id
// of 1 to 64 characters of digits and letters exists (others are not found), after demoLatency.
func demoProducts(member string, loads prometheus.Counter) corral.LoadFunc[[]byte] {
	return func(ctx context.Context, id string) ([]byte, error) {
		loads.Inc()
		if len(id) == 0 || len(id) > 64 || strings.Trim(id, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			return nil, corral.ErrNotFound
		}
		t := time.NewTimer(demoLatency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		h := fnv.New32a()
		h.Write([]byte(id))
		return json.Marshal(demoProduct{ID: id, Name: "Product " + id, PriceCents: 100 + int(h.Sum32()%9900),
			LoadedBy: member, LoadedAt: time.Now().UTC().Round(time.Millisecond)})
	}
}
