// Command loadgen is the test node's load generator: a pod that reads hot keys through a
// Service, as an application in the cluster would, at a steady rate, and counts what it got.
// It runs until its bounds (-max-requests, -max-duration) or SIGTERM, and answers
//
//	GET /stats   JSON: requests, ok, failed, the last failures, X-Corral-Source counts,
//	             the slowest request
//
// on -listen, for the test on the node's host. A request fails when it errors (connection
// refused or reset, timeout), answers other than 200, or returns another value than the
// counting origin's for its key ("<key>@0": the test never bumps a hot key's generation).
// Requests use one pooled client with keep-alive, as a Go service would: a connection to a
// pod that closes it is retried by net/http for these idempotent GETs, and nothing else is.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type stats struct {
	mu sync.Mutex
	// guards the fields below
	Requests int64            `json:"requests"`
	OK       int64            `json:"ok"`
	Failed   int64            `json:"failed"`
	Failures []string         `json:"failures"` // the last 50, oldest first
	Sources  map[string]int64 `json:"sources"`  // X-Corral-Source (or X-Catalog-Source) of the answers
	Slowest  string           `json:"slowest"`  // duration of the slowest request
	Running  bool             `json:"running"`
	slowest  time.Duration
}

func (s *stats) record(key string, took time.Duration, source string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Requests++
	if took > s.slowest {
		s.slowest = took
		s.Slowest = took.Round(time.Millisecond).String()
	}
	if err != nil {
		s.Failed++
		s.Failures = append(s.Failures, fmt.Sprintf("%s %s after %v: %v", time.Now().UTC().Format("15:04:05.000"), key, took.Round(time.Millisecond), err))
		if len(s.Failures) > 50 {
			s.Failures = s.Failures[1:]
		}
		return
	}
	s.OK++
	s.Sources[source]++
}

func main() {
	target := flag.String("target", "", "URL template of a read, {key} replaced by the key")
	keys := flag.String("keys", "", "comma-separated keys, read round-robin")
	rate := flag.Float64("rate", 200, "requests per second, over all workers")
	workers := flag.Int("workers", 8, "concurrent readers")
	timeout := flag.Duration("timeout", 5*time.Second, "bound on one request")
	maxRequests := flag.Int64("max-requests", 2_000_000, "stop after this many requests")
	maxDuration := flag.Duration("max-duration", 40*time.Minute, "stop after this long")
	listen := flag.String("listen", ":8081", "address of /stats")
	flag.Parse()
	ks := strings.Split(*keys, ",")
	if *target == "" || *keys == "" || *rate <= 0 || *workers <= 0 {
		log.Fatal("loadgen: -target, -keys, a positive -rate and -workers are needed")
	}

	st := &stats{Sources: map[string]int64{}, Running: true}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		defer st.mu.Unlock()
		json.NewEncoder(w).Encode(st)
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { log.Print(srv.ListenAndServe()) }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *maxDuration)
	defer cancel()
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: *workers, IdleConnTimeout: 90 * time.Second}}
	period := time.Duration(float64(*workers) / *rate * float64(time.Second))
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() {
			tick := time.NewTicker(period)
			defer tick.Stop()
			for i := w; ; i += *workers {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if n.Add(1) > *maxRequests {
					return
				}
				key := ks[i%len(ks)]
				start := time.Now()
				source, err := read(client, strings.ReplaceAll(*target, "{key}", key), key)
				st.record(key, time.Since(start), source, err)
			}
		})
	}
	log.Printf("loadgen: %d workers reading %d keys from %s at %.0f/s", *workers, len(ks), *target, *rate)
	wg.Wait()
	st.mu.Lock()
	st.Running = false
	log.Printf("loadgen: done: %d requests, %d failed", st.Requests, st.Failed)
	st.mu.Unlock()
	// Keep answering /stats until the pod is deleted.
	<-ctx.Done()
	if ctx.Err() == context.DeadlineExceeded {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
	}
}

// read GETs url and checks the answer is key's value.
func read(c *http.Client, url, key string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s: %.200q", resp.Status, b)
	}
	if want := key + "@0"; string(b) != want {
		return "", fmt.Errorf("value %.200q, want %q", b, want)
	}
	source := resp.Header.Get("X-Corral-Source")
	if source == "" {
		source = resp.Header.Get("X-Catalog-Source")
	}
	return source, nil
}
