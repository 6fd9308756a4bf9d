package main

import (
	"context"
	"flag"
	"fmt"
	"net"

	"github.com/corralcache/corral/cmd/corral/internal/resp"
)

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
	})
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.resp = s
	d.mu.Unlock()
	return nil
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
