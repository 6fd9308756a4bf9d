package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// recordKeeper is a slog.Handler that keeps every record.
type recordKeeper struct{ records *[]slog.Record }

func (h recordKeeper) Enabled(context.Context, slog.Level) bool { return true }
func (h recordKeeper) Handle(_ context.Context, r slog.Record) error {
	*h.records = append(*h.records, r)
	return nil
}
func (h recordKeeper) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordKeeper) WithGroup(string) slog.Handler      { return h }

// A flood of one warning is cut to a burst, then one a second, and the next one logged
// says how many were dropped; another kind, and records below Warn, pass untouched.
func TestLogFloodIsRateLimited(t *testing.T) {
	var kept []slog.Record
	suppressed := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	h := newFloodHandler(recordKeeper{&kept}, suppressed)
	now := time.Unix(1000, 0)
	h.st.now = func() time.Time { return now }
	log := slog.New(h).With("front", "resp")

	for range 279 { // the warnings one hung-up pipeline logged
		log.Warn("Redis protocol: command failed", "err", "context canceled")
	}
	log.Warn("corral: refused a peer connection", "reason", "tls: expired")
	log.Warn("corral: refused a peer connection", "reason", "tls: no certificate")
	log.Info("corral serving")
	if len(kept) != floodBurst+3 {
		t.Fatalf("%d records logged, want %d: a burst of the flood and three others", len(kept), floodBurst+3)
	}
	if got := counterValue(suppressed); got != 279-floodBurst {
		t.Fatalf("corral_log_suppressed_total = %v, want %d", got, 279-floodBurst)
	}
	now = now.Add(3 * floodEvery)
	for range 10 {
		log.Warn("Redis protocol: command failed", "err", "context canceled")
	}
	last := kept[floodBurst+3:]
	if len(last) != 3 {
		t.Fatalf("%d records logged 3 s later, want 3", len(last))
	}
	var said int64
	last[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			said = a.Value.Int64()
		}
		return true
	})
	if said != 279-floodBurst {
		t.Fatalf("the first record after the flood says suppressed=%d, want %d", said, 279-floodBurst)
	}
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
