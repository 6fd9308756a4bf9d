package resp

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Redis protocol front's own metrics; its refusals count in
// corral_http_limit_hits_total.
type Metrics struct {
	conns  prometheus.Gauge
	panics prometheus.Counter
	// loopGets counts the GETs an event loop answered; moves, the connections handed from a
	// loop to a goroutine of their own and back.
	loopGets prometheus.Counter
	toConn   prometheus.Counter
	toLoop   prometheus.Counter
}

// NewMetrics registers the front's metrics with reg: corral_resp_connections and
// corral_resp_panics_total, corral_resp_loop_gets_total and corral_resp_moves_total. corral serve registers them whether the front runs or not, so
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
		loopGets: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_resp_loop_gets_total",
			Help: "Redis protocol GETs answered on an event loop (--resp-loops), without a goroutine of the connection's own.",
		}),
	}
	moves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_resp_moves_total",
		Help: "Redis protocol connections moved from an event loop to a goroutine of their own (to=\"goroutine\": a command a loop does not answer) and back (to=\"loop\").",
	}, []string{"to"})
	m.toConn, m.toLoop = moves.WithLabelValues("goroutine"), moves.WithLabelValues("loop")
	for _, c := range []prometheus.Collector{m.conns, m.panics, m.loopGets, moves} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
