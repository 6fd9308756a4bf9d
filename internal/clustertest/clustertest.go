// Package clustertest is what the tests of a cluster of real corral nodes on this machine
// share, whichever API they drive (package corral's, or the internal packages' below it): a
// source of truth that counts its loads, waiting for a condition on a busy machine, logs kept
// for a test that fails, and the metrics a registry gathered.
package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Eventually waits until cond holds, and fails tb if it does not within 20 s: long enough
// for a busy 2-core machine, and no test depends on a sleep being long enough.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Source is a backend shared by every node of an in-process cluster: it counts loads per key.
type Source struct {
	mu    sync.Mutex
	loads map[string]int
	Total atomic.Int64
	delay time.Duration
	Gen   atomic.Int64 // bumps the value, so a refill is visible
}

// NewSource returns a source whose loads take delay.
func NewSource(delay time.Duration) *Source { return &Source{loads: map[string]int{}, delay: delay} }

// Load is the loader: "key@gen".
func (s *Source) Load(ctx context.Context, key string) (string, error) {
	s.Total.Add(1)
	s.mu.Lock()
	s.loads[key]++
	s.mu.Unlock()
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return fmt.Sprintf("%s@%d", key, s.Gen.Load()), nil
}

// Count returns how often key was loaded.
func (s *Source) Count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads[key]
}

// GetAll reads key on every group of gs — package corral's groups, or package group's — and
// returns the values; it fails tb on an error.
func GetAll[G interface {
	Get(ctx context.Context, key string) (string, error)
}](tb testing.TB, gs []G, key string) []string {
	tb.Helper()
	var out []string
	for i, g := range gs {
		v, err := g.Get(context.Background(), key)
		if err != nil {
			tb.Fatalf("Get(%s) on node %d: %v", key, i, err)
		}
		out = append(out, v)
	}
	return out
}

// SyncBuffer is a bytes.Buffer safe for concurrent writes: a node's log, printed when its
// test fails.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// MetricValue sums every series of one metric family gathered from reg.
func MetricValue(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
			return sum
		}
	}
	tb.Fatalf("metric %s not registered", name)
	return 0
}

// MetricWithLabel returns the value of the series of name whose one label has value.
func MetricWithLabel(tb testing.TB, reg *prometheus.Registry, name, value string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
