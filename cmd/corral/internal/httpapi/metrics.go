package httpapi

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the HTTP front's event loops' metrics (loop.go); its refusals count in
// corral_http_limit_hits_total.
type Metrics struct {
	// loopHits counts the hits an event loop answered; toConn and toLoop, the connections
	// moved from a loop to a goroutine of their own and back.
	loopHits prometheus.Counter
	toConn   prometheus.Counter
	toLoop   prometheus.Counter
}

// NewMetrics registers the loops' metrics with reg: corral_http_loop_hits_total and
// corral_http_moves_total. corral serve registers them whether loops run or not, so that a
// dashboard finds them at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		loopHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_http_loop_hits_total",
			Help: "HTTP GETs answered on an event loop (--http-loops), without a goroutine of the connection's own.",
		}),
	}
	moves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_http_moves_total",
		Help: "HTTP connections moved from an event loop to a goroutine of their own (to=\"goroutine\": a request a loop does not answer at once) and back (to=\"loop\").",
	}, []string{"to"})
	m.toConn, m.toLoop = moves.WithLabelValues("goroutine"), moves.WithLabelValues("loop")
	for _, c := range []prometheus.Collector{m.loopHits, moves} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
