// Package transport carries corral's peer protocol: the requests one replica
// sends to another on the peer port (Get from the owner, framed on a
// connection of its own — see below —; and over gRPC Set and Remove through
// the owner, Invalidate the copies a write made older, Handoff when leaving,
// WaitsFor when looking for a fill cycle, Lease and FillSet for fillers
// outside the loader — see LeaseHandler), the server that answers them for a
// Handler, and the client that keeps one connection per peer. It is the only package of corral that speaks gRPC: status codes stop
// here, and callers see this package's errors.
//
// The protocol is transport/peerpb/peer.proto; the generated code beside it
// is checked in.
//
// # Usage
//
// The receiving side serves a Handler (the root corral package implements
// it):
//
//	srv, err := transport.NewServer(handler, transport.ServerConfig{TLS: peerTLS})
//	if err != nil { ... }
//	go srv.Serve(lis)  // returns nil after Stop
//	...
//	srv.Stop(ctx)      // graceful until ctx ends, then hard
//
// The sending side shares one Client for all peers:
//
//	client, err := transport.NewClient(transport.ClientConfig{TLS: peerTLS, OnCall: countRPC})
//	if err != nil { ... }
//	defer client.Close()
//	resp, err := client.Get(ctx, owner.PeerAddr, &peerpb.GetRequest{Header: hdr, Group: g, Key: k})
//	switch {
//	case err == nil:
//	case transport.IsUnreachable(err):
//		// route to the key's next owner on the ring
//	case errors.Is(err, transport.ErrNotFound): ...
//	}
//
// # Gets travel on one stream per peer
//
// Client.Get does not make a unary call: the Client keeps one long-lived
// GetStream per peer and every Get to that peer is a frame on it, tagged by an
// id; the answers come back on the stream in any order. A unary call is a new
// HTTP/2 stream with headers and trailers and four goroutine hand-offs; on one
// stream, many callers' frames share each read and write. That is what makes a
// remote hit cheap: in docs/performance.md (make bench-compare, each node a
// process of its own), it takes about a third of a bare gRPC unary call's time
// and CPU at 1 caller and under half at 16 and 64, less than groupcache's
// HTTP/1.1 Get at each, and less than a Redis GET from 16 callers on (at 1, Redis
// is faster).
//
// Everything a unary Get had travels in the frames: the caller's deadline
// (the Server runs the Get under it), cancellation (a caller that leaves sends
// a cancel; the Server's work for it ends, while a fill other callers wait on
// goes on), errors with their codes and details (the same table, codes.go),
// the header with the fill chain and the sender's epoch. On the Server, a Get
// its Handler can answer at once (HitHandler: a value it holds) is answered on
// the stream's receive loop; every other Get runs on a goroutine of its own,
// so a slow fill never delays the hits queued behind it.
//
// A Get under a context with a Canceller method (a fill's loader context, from
// package fill: it ends at its deadline or when its Canceller ends, and its
// Done costs it a timer) is ended at its deadline by the stream, one timer per
// stream, and waits on the Canceller's Done: the Get makes no timer of its own.
//
// When a stream breaks — the connection was lost, Forget or Close closed it,
// the peer stopped — every Get waiting on it fails at once as unreachable, so
// failover starts then, not at each call's deadline; the next Get opens a new
// stream (after a failed opening, calls fail at once for a backoff of 100 ms
// doubling to 2 s). Each side bounds the Gets in flight on one stream
// (ClientConfig.MaxStreamCalls: a caller waits for a slot;
// ServerConfig.MaxStreamCalls: a call past it is answered with ErrStreamFull).
// Hits, answered at once, are bounded by what the peer reads: once 4 MiB of
// answers wait for the Server's writer, its receive loop reads no more calls
// until the writer has taken them, so a peer that asks and does not read is
// held back by TCP's or HTTP/2's flow control rather than growing the queue. A
// value the Server holds that is larger than ServerConfig.MaxStreamAnswer
// (64 KiB) is not sent on the stream, where every answer behind it would wait
// for its transfer: the caller is told to ask again with a unary call, whose
// frames interleave with the stream's. A message is checked against
// MaxMessageSize before it is sent, and an answer against the caller's limit
// too (each call carries it), because an oversized message would end the stream
// for every call on it: the one call fails, as a unary call would. A peer that
// answers GetStream with Unimplemented (a corral from before streams, during a
// rolling upgrade) is asked with unary Gets. Set, Remove, Invalidate, Handoff,
// WaitsFor, Reconcile, Lease and FillSet stay unary calls.
//
// # The stream is framed, not gRPC
//
// The Gets' stream is not a gRPC stream but a TCP connection of its own to the same port,
// which opens with an 8-byte preface and then carries the same GetCall and GetReply
// messages, each behind a 4-byte length (frame.go); with TLS, a TLS handshake follows the
// preface and the frames travel inside TLS.
// gRPC hands every frame across a reader and a writer goroutine on each side; on a small
// machine each hand-off is a thread wake-up, and framing took a remote hit at 1 caller from
// 91 to 71 µs p50 (e2e/bench/HISTORY.md; BenchmarkGet times a Get on each kind of stream:
// go test -run '^$' -bench 'BenchmarkGet$' ./transport). On a framed connection a caller
// writes its own frame to the socket and the stream's reader hands each answer straight to
// its caller; the Server reads the socket on the stream's receive loop and writes a hit's
// answer itself. The Server tells the two kinds of connection apart by their first bytes
// (sniff.go) and serves gRPC on every other. The framed stream keeps everything above —
// deadlines, cancels, errors, bounds, the failing of every call at once when it breaks —
// and pings the peer after KeepaliveTime of silence, breaking when no answer comes within
// KeepaliveTimeout, as gRPC's keepalive does. A peer that does not answer the preface with
// its own (a corral from before framing, or from before framing inside TLS) gets its Gets
// on its gRPC stream.
//
// # What the caller must do
//
//  1. Call Server.Stop when done with a Server that has served, and
//     Client.Close when done with a Client; both are safe to call twice.
//     NewServer and NewClient start nothing, so an error path between them
//     needs no cleanup.
//  2. Call Client.Forget(addr) when a member leaves or dies, so that its
//     connection is closed and not kept for ever.
//  3. Return only this package's errors from a Handler when they apply
//     (ErrNotFound, ErrFillCycle, ErrUnknownGroup, ErrLeaving, ErrInvalidArgument
//     wrapped with the reason, *FillFailedError); anything else reaches the
//     other side as a *RemoteError with code "Internal".
//  4. Make Handler methods return soon after their ctx ends: Stop waits for
//     them.
//  5. Give CallTimeout a value above the longest fill timeout (a remote Get
//     waits for the owner's fill), or a slow loader reads as an unreachable
//     owner.
//
// # Definitions
//
// Unreachable: the call got no answer from the peer: the connection was
// refused, reset or closed (also by Forget), its Get stream broke, the peer was shutting down, a
// connection attempt took longer than ConnectTimeout, or the call ran past
// CallTimeout. IsUnreachable reports it. An answer from the peer, of any
// kind, is never unreachable; neither is the end of the caller's own ctx,
// which every call returns as ctx.Err() alone.
//
// Call deadline: a ctx without a deadline gets CallTimeout; a ctx with one
// keeps it. Only the first can make a call unreachable by time.
//
// Message limit: MaxMessageSize bounds each protobuf message, in bytes,
// both ways (default DefaultMaxMessageSize, 8 MiB + 64 KiB). An oversized
// request fails on the side that notices first with an error wrapping
// ErrInvalidArgument whose text says "MaxMessageSize" and both sizes; the
// connection keeps serving other calls.
//
// Errors on the wire: see the table at the top of codes.go.
//
// # TLS
//
// ServerConfig.TLS and ClientConfig.TLS take ordinary *tls.Config values.
// For mutual authentication the server sets ClientAuth to
// tls.RequireAndVerifyClientCert with ClientCAs, and the client sets
// Certificates and RootCAs. Peers are dialled by "ip:port", so a peer's
// certificate must carry its IP as a SAN unless the client's config sets
// ServerName or its own verification. A TLS failure is reported as
// unreachable: nothing useful can be said to that peer.
//
// # Keepalive
//
// Clients ping idle connections every 20s (DefaultKeepaliveTime) and close
// them if the ack takes over 5s; servers do the same and allow client pings
// as often as every 10s, which is grpc-go's floor, so any Client is welcome
// at any Server with default settings. keepalive.go has the reasoning.
//
// # Regenerating the protocol code
//
// After editing transport/peerpb/peer.proto, run from the module root:
//
//	go generate ./transport/...
//
// with these on PATH (the versions that made the checked-in files):
//
//	protoc             libprotoc 3.21.12  (Debian: apt-get install protobuf-compiler)
//	protoc-gen-go      v1.36.12           (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12)
//	protoc-gen-go-grpc v1.6.2             (go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2)
package transport
