package resp

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Redis protocol front's own metrics; its refusals count in
// corral_http_limit_hits_total.
type Metrics struct {
	conns  prometheus.Gauge
	panics prometheus.Counter
}

// NewMetrics registers the front's metrics with reg: corral_resp_connections and
// corral_resp_panics_total. corral serve registers them whether the front runs or not, so
// that a dashboard finds them at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_resp_connections",
			Help: "Redis protocol connections open now (at most --resp-max-conns).",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_resp_panics_total",
			Help: "Panics recovered on a Redis protocol connection's goroutines; each ended its connection alone.",
		}),
	}
	for _, c := range []prometheus.Collector{m.conns, m.panics} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
