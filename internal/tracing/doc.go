// Package tracing is corral's side of OpenTelemetry: the spans of the public calls (Get,
// GetMany, Set, Remove, RemoveByTag, Lease, FillSet), their attributes, and what a span may
// say of a key (Keys). A node that traces has one *Tracer, shared by its parts; a nil *Tracer
// is a node that does not trace, and every caller checks for nil before it builds anything,
// so that tracing off costs a local hit nothing.
//
// The spans of a Get through a peer, and what each says:
//
//	corral.Get                   internal  corral.group, corral.source, corral.owner, corral.acting_owner
//	└ corral.fetch               internal  the request to the owner that this node's Gets of the key share;
//	  │                                    links to the Gets coalesced onto it
//	  └ corral.peer.v1.Peer/Get  client    rpc.*, server.address (package transport)
//	    └ corral.peer.v1.Peer/Get server   on the owner, in the same trace: corral.group, corral.source
//	      └ corral.fill          internal  the loader's run; links to every Get and request coalesced onto it
//
// A batch loader's run (WithBatchLoad) is one corral.fill for all its keys (corral.keys), and
// a GetMany's request to one owner one corral.fetch, each linked to the other callers in it.
//
// Events on the span of the request's path: corral.failover (the owner was unreachable, or
// does not serve the key; the next owner is asked), corral.breaker_trip (that made its
// breaker open), corral.breaker_open (the owner was found unreachable a moment ago and is
// skipped), corral.warm_pull (the fill took the copy a previous owner still held),
// corral.backup_taken (the fill took this node's backup of a crashed owner's entry),
// corral.local_fallback (no owner answered; this node filled).
//
// A node starts a trace only at a public call whose ctx has no span, and no span at all
// inside one that does not record (sampled out): the trace context still goes on to the
// owner and the loader, so that they keep the sampler's decision.
package tracing
