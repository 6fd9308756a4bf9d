// Package httpapi is corral serve's HTTP API: the keys of the node's groups, leases for
// fillers outside Go, tags, the cluster's view, the probes, /metrics and the debug page,
// behind the API token and within the limits on what one request and one client may cost.
//
//	GET    /v1/groups/{group}/keys/{key}        value (X-Corral-Source: hit, fill, coalesced, …)
//	PUT    /v1/groups/{group}/keys/{key}        store the body (Surrogate-Key tags it); 204
//	DELETE /v1/groups/{group}/keys/{key}        invalidate cluster-wide; 204
//	GET    …/keys/{key}?lease=5s[&wait=200ms]   a lease (X-Corral-Lease-State, X-Corral-Lease)
//	PUT    …/keys/{key}?ttl=60s[&swr=30s]       store for a lifetime, under X-Corral-Lease if sent
//	GET    …/keys/{key}?peek                    what the key's owner holds, without a fill
//	GET    /v1/groups/{group}/keys?key=a&key=b  a batch read (batch.go): JSON of values in
//	POST   /v1/groups/{group}/keys:batch        base64, missing keys, failed keys; the POST's
//	                                            body is {"keys": ["a", "b"]}, and it is a read
//	DELETE /v1/tags/{tag}                       purge a tag cluster-wide; 204
//	GET    /v1/cluster[?key=K]                  ClusterView as JSON
//	GET    /healthz, /readyz, /metrics, /debug/corral
//
// # Usage
//
//	api, err := httpapi.New(httpapi.Config{
//		Node: node, Groups: groups, Leases: leases, Gatherer: reg, Ready: ready,
//		Hits: hits, Token: token, MaxValueBytes: 8 << 20, TTL: time.Minute,
//		Log: log, Limits: httpapi.DefaultLimits(),
//	})
//	if err != nil { … }
//	srv := api.Server()
//	go srv.Serve(lis)
//	…
//	err = srv.Shutdown(ctx) // on shutdown, before the node closes
//
// The caller's duties:
//  1. Give the API the Leases and the limithits.Counter the Redis protocol front has, so that
//     a client's leases and the limits' hits count together whichever front they came through.
//  2. Make Groups with the node's options and bound, and give the node Groups.Group as its
//     AutoGroup: the API makes a request's group on first use through them.
//  3. Serve the API with the Server that Server returns, which carries the header and
//     read-header limits, one at a time, and shut it down before the node closes.
//
// # How it serves
//
// Every connection is first the hit path's own (front.go): a plain GET of a key, read whole,
// is served by the API's handler without net/http, allocating nothing; at the first request
// it does not take, the connection goes to net/http, with the bytes read, for good. The
// answers are the same either way (TestFrontMatchesNetHTTP); the front saves net/http's
// per-request goroutine, maps and contexts, most of a hit's CPU. With Config.Loops, event
// loops come before the front (loop.go, loop_linux.go): they answer the hits of values held
// here without a goroutine per connection, and hand a connection to the front's goroutine,
// and take it back, as its requests need.
//
// # Status codes
//
// Errors are text with a short reason. 400: a name, key, tag, lease or lifetime out of its
// bounds, or a path with an empty key or tag; a batch read of no keys, of more than 10,000, of
// a key out of bounds or not UTF-8, or with a body that is not {"keys": [...]} (a batch read
// answers 200 whatever its keys' fates: each failed key carries its own status). 401: no token
// where one is needed. 404: not found (the origin said so; without an origin, nothing was
// stored under the key, and the body says so), or a read without the token of a group that does
// not exist. 408: a body not arrived whole within Limits.ReadBodyTimeout (the connection is
// then closed). 409: a lease that is busy or no longer live. 413: a body over MaxValueBytes (a
// PUT's value, a batch read's keys). 429: a client over its bound of requests or leases, or a
// new group past --max-groups. 431: a header over MaxHeaderBytes. 502: the origin failed. 503:
// the owner's lease table is full, the node is shutting down, or the client closed its
// connection (or only its writing half) before the answer. 504: the peers did not answer.
// 508: a fill that asked for its own key. 202: a write that stands although some member could
// not be told. Each refusal of a limit counts in corral_http_limit_hits_total (package
// limithits).
package httpapi
