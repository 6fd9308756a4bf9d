package main

import (
	"math/bits"
	"slices"
	"time"
)

// hist is a latency histogram whose buckets are at most 1/32 (≈3 %) wide relative to their
// values: exact below 64 ns, then 32 buckets per power of two. Recording allocates nothing
// once the map holds the bucket; a load loop keeps one per caller and merges them at the end.
type hist struct {
	Counts map[int]int64 `json:"counts"`
	N      int64         `json:"n"`
	Max    int64         `json:"max"`
}

func newHist() *hist { return &hist{Counts: map[int]int64{}} }

func bucketOf(ns int64) int {
	if ns < 64 {
		return int(max(ns, 0))
	}
	shift := bits.Len64(uint64(ns)) - 6 // ns>>shift is in [32, 64)
	return 64 + (shift-1)*32 + int(ns>>shift) - 32
}

// bucketValue is the middle of bucket b.
func bucketValue(b int) int64 {
	if b < 64 {
		return int64(b)
	}
	shift := (b-64)/32 + 1
	m := int64((b-64)%32 + 32)
	return m<<shift + (int64(1)<<shift)/2
}

func (h *hist) record(d time.Duration) {
	h.Counts[bucketOf(int64(d))]++
	h.N++
	h.Max = max(h.Max, int64(d))
}

func (h *hist) merge(o *hist) {
	for b, n := range o.Counts {
		h.Counts[b] += n
	}
	h.N += o.N
	h.Max = max(h.Max, o.Max)
}

// quantile returns the value below which a fraction q of the samples lie (q in [0, 1]).
func (h *hist) quantile(q float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	keys := make([]int, 0, len(h.Counts))
	for b := range h.Counts {
		keys = append(keys, b)
	}
	slices.Sort(keys)
	rank := int64(q * float64(h.N-1))
	var seen int64
	for _, b := range keys {
		seen += h.Counts[b]
		if seen > rank {
			return time.Duration(min(bucketValue(b), h.Max))
		}
	}
	return time.Duration(h.Max)
}

// quantileOf returns the q-quantile of exact samples (sorted in place).
func quantileOf(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[int(q*float64(len(ds)-1))]
}

// median returns the median of xs (sorted in place); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
