// Package limithits counts what corral serve's two fronts, the HTTP API and the Redis
// protocol, turn away, in one metric: corral_http_limit_hits_total{limit}. Each limit turns a
// request or a connection away with a clear answer, and none stops the node serving anyone
// else:
//
//	limit                 status  what
//	header                431     request line and headers over --max-header-bytes
//	body                  413     a PUT body over --max-value-bytes
//	client_requests       429     a client (by IP) with --max-client-requests data requests in flight
//	ops_requests          429     a client (by IP) with 64 requests in flight to /healthz, /readyz
//	                              and /metrics: a budget of their own, so that a kubelet's probe
//	                              or a scrape from an IP whose data requests are at their bound
//	                              is still answered
//	groups                429     a new group past --max-groups
//	lease_time            400     a lease (?lease=, FILLGET's fill_ms) longer than --max-lease
//	client_leases         429     a lease past the client's --max-client-leases (-BUSY over RESP)
//	leases_full           503     a lease the key's owner refused: its table of the group is full
//	                              (-BUSY over RESP)
//	read_header_timeout   -       a connection closed for not sending a whole request header
//	                              within --read-header-timeout (a slowloris)
//	read_body_timeout     408     a request body not arrived whole within --read-body-timeout of
//	                              its header (a trickled body); its connection is closed
//	batch                 400     a batch read refused whole (HTTP GET …/keys?key=, POST …/keys:batch;
//	                              MGET: -ERR): more keys than 10,000, a key empty or over 4 KiB, or
//	                              one the origin cannot be asked for; nothing is read
//	resp_command          -       a Redis-protocol command over its bound: of more bytes, or an
//	                              inline line over 64 KiB, or a count of arguments no command of
//	                              that many bytes could hold, its connection is cut off; of more
//	                              arguments than 10,001 within those bytes, it is read, dropped
//	                              and answered -ERR, and the connection goes on (an MGET of more
//	                              than 10,000 keys counts as batch)
//	resp_protocol         -       a Redis-protocol connection cut off for a request that is not RESP
//	                              (or an inline line with unbalanced quotes)
//	resp_pending_bytes    -       a Redis-protocol command refused past --resp-max-pending-bytes
//	resp_connections      -       a Redis-protocol connection refused past --resp-max-conns
//	resp_idle_timeout     -       a Redis-protocol connection closed after --resp-idle-timeout idle
//	resp_command_timeout  -       a Redis-protocol connection closed for a command not whole within
//	                              --resp-command-timeout, or a reply not read within it
//
// The library's own limits (keys, values, peers, fills) count in corral_limit_hits_total.
//
// # Usage
//
//	hits, err := limithits.New(reg) // once per process: the metric is registered with reg
//	…
//	hits.Hit(limithits.Body)
//
// The caller's duties:
//  1. Make one Counter and hand it to every part that turns clients away, so that both fronts
//     count in the same metric; a second New on the same registry fails.
//  2. Count with the constants of this package: every series exists, at 0, from New on, and
//     a label not among them would be a series no dashboard knows.
package limithits
