// Package resp is corral serve's Redis protocol front (--resp-port): Redis clients read,
// write and fill through leases the keys of one group (--resp-group), with the commands a
// cache needs and two of corral's own, FILLGET and FILLSET.
//
//	PING [msg]                              PONG
//	HELLO [2|3 [AUTH user pass] [SETNAME n]] the server's map; switches to RESP3 with 3
//	AUTH [user] token                       OK, or WRONGPASS (see --api-token-file)
//	GET key                                 the value, or nil; with --origin a read-through, as
//	                                        HTTP GET: a key not held (DEL included) is fetched
//	MGET key [key …]                        an array of each key's value or nil, in order: one
//	                                        batch read (GetMany), at most 10,000 keys; a key that
//	                                        failed (not a not-found) fails the command: -ERR
//	                                        naming the failed keys
//	SET key value [EX s | PX ms] [TAGS t …] OK; without EX or PX the value takes --ttl
//	DEL key [key …]                         the number of keys deleted (each cluster-wide)
//	EXISTS key [key …]                      how many of the keys the owner holds (a key named
//	                                        twice counts twice); never reads through --origin
//	TTL key, PTTL key                       -2 not held, -1 never expires, else the freshness
//	                                        left (s rounded, ms); 0 for a stale value in --swr
//	DELTAG tag [tag …]                      the number of tags purged (each cluster-wide)
//	FILLGET key fill_ms [WAIT ms]           [HIT, v] | [FILL, token] | [BUSY, nil] | [STALE, v, token|nil]
//	FILLSET key value ttl_ms token [SWR ms] [TAGS t …]
//	                                        1 stored, 0 the token is no longer live
//	CLIENT SETNAME|GETNAME|SETINFO|ID, SELECT 0, ECHO, COMMAND, QUIT, for clients that send them
//
// # Usage
//
//	metrics, err := resp.NewMetrics(reg) // at start, whether the front runs or not
//	…
//	ln, err := net.Listen("tcp", ":6379")
//	s, err := resp.Start(ln, resp.Config{
//		Group: g, Node: node, Leases: leases, Metrics: metrics, Hits: hits,
//		Token: token, MaxValueBytes: 8 << 20, Log: log, Limits: resp.DefaultLimits(),
//	})
//	if err != nil { … }
//	…
//	err = s.Close(ctx) // on shutdown
//
// The caller's duties:
//  1. Give the front the Leases and the limithits.Counter the HTTP API has, so that a
//     client's leases and the limits' hits count together whichever front they came through.
//  2. Make the group with package objects' Codec, as every other group of the node.
//  3. Close the Server, with a deadline: Close waits for every connection's goroutine.
//
// # How it serves
//
// Requests are read by the package's own reader (reader.go), pipelines and the inline
// (telnet) form included; replies are written in RESP2, and in RESP3 where the two differ
// (the HELLO map, null) on a connection that said HELLO 3. Each connection is served by one
// goroutine, which reads a command, runs it and writes its reply; replies are flushed before
// the goroutine waits for more bytes, so a pipeline's replies leave together. A pipeline's
// SETs that have arrived are applied together, those of keys owned elsewhere at once, and
// answered in order (pipeline.go). A FILLGET with
// WAIT blocks its connection, as BLPOP does in Redis: the other callers of a client pool are
// not held.
//
// What a connection may cost is bounded (Limits): the connections at once, the time a
// connection may sit idle, the time one command may take to arrive and its reply to be
// read, the bytes of one command, and the bytes of all commands still being read. A
// command's arguments are bounded too (10,001: an MGET of a batch read's 10,000 keys); a
// command of more, within its bytes, is read, dropped and answered -ERR, and the
// connection goes on. A panic
// on a connection's goroutines ends that connection alone: it is logged, counted in
// corral_resp_panics_total, and the client is told.
package resp
