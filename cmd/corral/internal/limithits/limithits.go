package limithits

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Limit is a label value of corral_http_limit_hits_total: which limit turned a client away.
type Limit string

// The limits, as the package's table defines them.
const (
	Header             Limit = "header"
	Body               Limit = "body"
	ClientRequests     Limit = "client_requests"
	OpsRequests        Limit = "ops_requests"
	Groups             Limit = "groups"
	ReadHeaderTimeout  Limit = "read_header_timeout"
	ReadBodyTimeout    Limit = "read_body_timeout"
	RESPCommand        Limit = "resp_command"
	RESPProtocol       Limit = "resp_protocol"
	RESPPendingBytes   Limit = "resp_pending_bytes"
	RESPConnections    Limit = "resp_connections"
	RESPIdleTimeout    Limit = "resp_idle_timeout"
	RESPCommandTimeout Limit = "resp_command_timeout"
	LeaseTime          Limit = "lease_time"
	ClientLeases       Limit = "client_leases"
	LeasesFull         Limit = "leases_full"
	Batch              Limit = "batch"
)

// Counter counts the hits of each limit. It is safe for concurrent use; a nil *Counter
// counts nothing.
type Counter struct {
	hits *prometheus.CounterVec
}

// New registers corral_http_limit_hits_total with reg, every series at 0.
func New(reg prometheus.Registerer) (*Counter, error) {
	limits := []Limit{Header, Body, ClientRequests, OpsRequests, Groups, ReadHeaderTimeout, ReadBodyTimeout,
		RESPCommand, RESPProtocol, RESPPendingBytes, RESPConnections, RESPIdleTimeout, RESPCommandTimeout,
		LeaseTime, ClientLeases, LeasesFull, Batch}
	names := make([]string, len(limits))
	for i, l := range limits {
		names[i] = string(l)
	}
	c := &Counter{hits: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_http_limit_hits_total",
		Help: "Requests and connections the HTTP and Redis-protocol fronts turned away, by limit (" + strings.Join(names, ", ") + ").",
	}, []string{"limit"})}
	for _, name := range names {
		c.hits.WithLabelValues(name) // every series exists from the start, at 0
	}
	if err := reg.Register(c.hits); err != nil {
		return nil, err
	}
	return c, nil
}

// Hit counts one hit of l.
func (c *Counter) Hit(l Limit) {
	if c != nil {
		c.hits.WithLabelValues(string(l)).Inc()
	}
}

// Count is how many hits of l c has counted.
func (c *Counter) Count(l Limit) float64 {
	var m dto.Metric
	if c == nil || c.hits.WithLabelValues(string(l)).Write(&m) != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
