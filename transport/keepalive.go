package transport

import (
	"time"

	"google.golang.org/grpc/keepalive"
)

// Keepalive, both sides. Peer connections are long-lived and mostly idle
// between bursts; pings find a peer that vanished without closing its
// connection (node lost, network partition) before membership may have, and
// keep idle connections open through NATs and conntrack tables.
//
// The client pings an idle connection every KeepaliveTime and the server
// accepts pings as often as every MinPingInterval. A server that sees pings
// more often answers with GOAWAY "too_many_pings" and the connection is lost,
// so the two must agree: grpc-go raises any client KeepaliveTime below 10s
// to 10s, and the server's default MinPingInterval is exactly that floor, so
// every Client config is accepted by a Server with the default policy.
const (
	// DefaultKeepaliveTime is how long a connection stays idle before it is
	// pinged: cheap (one frame per 20s per peer) and, with the timeout, a
	// silent peer is noticed within 25s.
	DefaultKeepaliveTime = 20 * time.Second

	// DefaultKeepaliveTimeout is how long a ping's ack may take before the
	// connection is closed. An ack is a frame the peer's transport sends
	// without running any handler, so 5s is generous even under load.
	DefaultKeepaliveTimeout = 5 * time.Second

	// DefaultMinPingInterval is the shortest ping interval a Server allows a
	// client: grpc-go's own floor for client keepalive.
	DefaultMinPingInterval = 10 * time.Second

	// minClientKeepaliveTime is grpc-go's floor for a client's keepalive time.
	minClientKeepaliveTime = 10 * time.Second
)

func clientKeepalive(t, timeout time.Duration) keepalive.ClientParameters {
	return keepalive.ClientParameters{
		Time:    t,
		Timeout: timeout,
		// Peer connections are idle most of the time; pinging only while a
		// call is in flight would miss a peer that died between calls.
		PermitWithoutStream: true,
	}
}

func serverKeepalive(t, timeout time.Duration) keepalive.ServerParameters {
	// MaxConnectionIdle and MaxConnectionAge stay infinite: a peer connection
	// is meant to live as long as both members do, and closing it would only
	// add a handshake to the next call.
	return keepalive.ServerParameters{Time: t, Timeout: timeout}
}

func serverEnforcement(minInterval time.Duration) keepalive.EnforcementPolicy {
	return keepalive.EnforcementPolicy{
		MinTime: minInterval,
		// Clients ping idle connections (see clientKeepalive).
		PermitWithoutStream: true,
	}
}
