package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"runtime"

	"github.com/corralcache/corral/cmd/corral/internal/clientlease"
	"github.com/corralcache/corral/cmd/corral/internal/httpapi"
	"github.com/corralcache/corral/cmd/corral/internal/resp"
)

// frontConfig is what `corral serve` is told about its fronts beside their limits: the Redis
// protocol front's port and group, and the API token.
type frontConfig struct {
	respPort      int
	respGroup     string
	respLoops     int
	httpLoops     int
	apiTokenFile  string
	apiTokenReads bool
	pprof         bool
}

// addFrontFlags binds frontConfig and the leases' limits, which default to their own.
func addFrontFlags(fs *flag.FlagSet, c *frontConfig, lim *clientlease.Limits) {
	fs.IntVar(&c.respPort, "resp-port", 0, "Redis protocol (RESP2/RESP3) port: GET, MGET, SET, DEL, EXISTS, TTL, PTTL, DELTAG, FILLGET, FILLSET, PING, HELLO, AUTH (0 = off)")
	fs.StringVar(&c.respGroup, "resp-group", "resp", "the group that holds every key of the Redis protocol front")
	fs.IntVar(&c.respLoops, "resp-loops", -1, "event loops that answer the Redis protocol's GETs of values this node holds fresh, as their owner or as near copies, as redis-server does, with no goroutine per connection (Linux; everything else goes to a goroutine of the connection's own, and back); -1 = one per 2 CPUs (GOMAXPROCS), and none with --otlp-endpoint, since a GET a loop answers records no span; 0 = none")
	fs.IntVar(&c.httpLoops, "http-loops", -1, "event loops that answer the HTTP API's GETs of values this node holds fresh, as their owner or as near copies, as nginx's workers do, with no goroutine per connection (Linux; everything else goes to a goroutine of the connection's own, and back); -1 = one per 2 CPUs (GOMAXPROCS), and none with --otlp-endpoint or --api-token-file; 0 = none")
	fs.StringVar(&c.apiTokenFile, "api-token-file", "", "file holding the API token: PUT, DELETE and leases (?lease=; without it a plain read), and the Redis protocol's SET, DEL, FILLGET and FILLSET, need it as Authorization: Bearer <token> (AUTH <token>); a read without it never creates a group")
	fs.BoolVar(&c.apiTokenReads, "api-token-reads", false, "reads need the token too: GET (and POST …/keys:batch, a batch read), /v1/cluster, /debug/corral (and every Redis command but AUTH, HELLO and QUIT); /metrics, /healthz and /readyz stay open")
	fs.BoolVar(&c.pprof, "pprof", false, "serve the Go runtime's profiles on the HTTP port at /debug/pprof/ (go tool pprof http://HOST:8080/debug/pprof/profile, …/heap, …/trace); with --api-token-file they need the token, reads or not")
	d := clientlease.DefaultLimits()
	fs.DurationVar(&lim.MaxLease, "max-lease", d.MaxLease, "longest lease (?lease=, FILLGET's fill_ms) granted; longer are refused (400, -ERR)")
	fs.IntVar(&lim.MaxClientLeases, "max-client-leases", d.MaxClientLeases, "leases one client IP may hold at once through this node (more get 429, -BUSY); a lease counts until it is stored through this node or its time is up; 0 = no bound")
}

func (c *frontConfig) validate() error {
	switch {
	case c.respPort < 0 || c.respPort > 65535:
		return fmt.Errorf("--resp-port %d out of range", c.respPort)
	case c.respLoops < -1:
		return fmt.Errorf("--resp-loops %d: want -1 (one per 2 CPUs), 0 (none) or more", c.respLoops)
	case c.httpLoops < -1:
		return fmt.Errorf("--http-loops %d: want -1 (one per 2 CPUs), 0 (none) or more", c.httpLoops)
	case c.apiTokenReads && c.apiTokenFile == "":
		return errors.New("--api-token-reads needs --api-token-file")
	}
	return nil
}

// addLimitFlags binds the HTTP API's limits, which default to the API's own.
func addLimitFlags(fs *flag.FlagSet, l *httpapi.Limits) {
	d := httpapi.DefaultLimits()
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", d.MaxHeaderBytes, "largest request line and headers accepted, bytes (larger get 431)")
	fs.IntVar(&l.MaxClientRequests, "max-client-requests", d.MaxClientRequests, "HTTP data requests one client IP may have in flight at once (more get 429); /healthz, /readyz and /metrics have a budget of their own (64 per IP); 0 = no bound")
	fs.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", d.ReadHeaderTimeout, "a connection that has not sent a whole request header in this time is closed (slowloris)")
	fs.DurationVar(&l.ReadBodyTimeout, "read-body-timeout", d.ReadBodyTimeout, "a request body that has not arrived whole this long after its header is refused: a PUT gets 408, and the connection is closed (a trickled body)")
}

// addRESPFlags binds the Redis protocol front's limits, which default to the front's own.
func addRESPFlags(fs *flag.FlagSet, l *resp.Limits) {
	d := resp.DefaultLimits()
	fs.IntVar(&l.MaxConns, "resp-max-conns", d.MaxConns, "Redis protocol connections open at once; one more is told \"max number of clients reached\" and closed")
	fs.DurationVar(&l.IdleTimeout, "resp-idle-timeout", d.IdleTimeout, "a Redis protocol connection that sends no command this long is told so and closed")
	fs.DurationVar(&l.CommandTimeout, "resp-command-timeout", d.CommandTimeout, "a Redis protocol command must arrive whole, and each reply be read, within this (a slowloris bound); the connection is closed otherwise")
	fs.Int64Var(&l.MaxPendingBytes, "resp-max-pending-bytes", d.MaxPendingBytes, "bytes that Redis protocol commands still being read may hold at once, over all connections (the first 64 KiB of each are not counted); a command past it is refused and its connection closed. At least one command's bound (--max-value-bytes + 72 KiB) applies")
}

// startRESP serves the Redis protocol on ln until stopRESP, with the leases, the limits'
// counter and the token the HTTP API has.
func (d *daemon) startRESP(ln net.Listener) error {
	g, err := d.groups.Group(d.node, d.cfg.respGroup)
	if err != nil {
		ln.Close()
		return fmt.Errorf("--resp-group: %w", err)
	}
	s, err := resp.Start(ln, resp.Config{
		Group: g, Node: d.node, Leases: d.leases, Metrics: d.respMetrics, Hits: d.hits,
		Token: d.token, TokenReads: d.cfg.apiTokenReads, Origin: d.origin,
		MaxValueBytes: d.cfg.maxValueBytes, Log: d.log, Limits: d.cfg.resp,
		Loops: eventLoops(d.cfg.respLoops, runtime.GOMAXPROCS(0), d.cfg.tracing.otlpEndpoint != ""),
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.resp = s
	d.mu.Unlock()
	return nil
}

// eventLoops is --resp-loops or --http-loops as the front takes it: flag, or for -1 one loop
// per 2 of procs (at least one), none when the node traces (a request a loop answers records
// no span).
func eventLoops(flag, procs int, tracing bool) int {
	switch {
	case flag >= 0:
		return flag
	case tracing:
		return 0
	}
	return max(procs/2, 1)
}

// stopRESP stops the Redis protocol front and waits for its connections until ctx ends.
// Safe to call twice, and when the front is off.
func (d *daemon) stopRESP(ctx context.Context) error {
	d.mu.Lock()
	s := d.resp
	d.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close(ctx)
}
