// Package clientlease grants the leases of fillers outside Go — a GET with ?lease= over the
// HTTP API, FILLGET over the Redis protocol — within corral serve's bounds: no fill time past
// --max-lease, and no more than --max-client-leases leases held by one client at once,
// whichever front it asks through. A lease blocks every other caller of its key until it is
// stored or lapses, so one client that took many, or long ones, would hold the cluster up.
//
// # Usage
//
//	leases, err := clientlease.New(clientlease.DefaultLimits(), hits)
//	if err != nil { … }
//	…
//	if err := leases.Check(o.Fill); err != nil { … 400, -ERR … }
//	l, err := leases.Lease(ctx, g, clientlease.ClientOf(conn.RemoteAddr().String()), key, o)
//	var full *clientlease.FullError
//	if errors.As(err, &full) { … 429 (full.Client) or 503, -BUSY … }
//	…
//	stored, err := g.FillSet(ctx, key, v, token, e)
//	leases.Stored(token)
//
// The caller's duties:
//  1. Give both fronts the same *Leases: a client's leases count together, whichever front
//     it used.
//  2. Check a fill time before Lease; Lease itself grants any the library allows.
//  3. Call Stored with the token of every FillSet that passes through this node, stored or
//     not, so that the client's slot comes back before the lease's time is up.
//  4. Name the client with ClientOf, from its connection, never from what it says of itself.
//
// # Definitions
//
// A client is the host of its connection's remote address. A lease counts against its client
// from its grant until a FillSet with its token passes through this node or its fill time is
// up; a lease revoked by a write, or stored through another node, counts until its time is up.
package clientlease
