// Package route is ownership and routing of a request: a request for a key goes to the
// key's owner on this node's view's ring, and when the owner cannot be reached — refused,
// reset, silent, out of the view — or answers that it does not serve the key, to the owner of
// the ring without it, which every replica computes alike. So a crash costs one refill per
// key, not one per replica, while failure detection catches up.
//
// A Router holds what that takes: the breakers (peers found unreachable and silent since,
// skipped by the requests after them, and probed until they answer), the silence probes that
// fail a request over from a peer that stopped answering, and the header every peer request
// carries (this node, its ring epoch, its write clock, the fill chain).
//
// # Usage
//
//	r := route.New(route.Config{View: &n.view, Client: client, Clock: clock, …})
//	owner, err := r.OnOwner(ctx, key, streamed, local, remote)
//	…
//	r.Close() // at the node's Close: stops and waits for the breakers' probes
//
// The caller's duties:
//  1. Call OnOwner for every request that belongs to a key's owner, with local for this node
//     and remote for another member; the request's own errors come back as they are.
//  2. Reset a member's breaker when it comes back in a new life (Breakers().Reset): what the
//     old life taught would keep it skipped until the Router's next probe.
//  3. Close the Router once no request can start any more.
package route
