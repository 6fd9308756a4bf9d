// Package lease is the owner's side of leases: the table of a group's leases on the node
// that owns their keys, and the answers to Lease and FillSet.
//
// Leases let a filler outside the process — a Python service with its own database access,
// a Node renderer — build a missing value itself, with one filler in the whole cluster and
// no polling: a Lease answers with the value, or makes its caller the filler (a token), or
// holds it until the filler's value is stored; a FillSet stores the value only while the
// token is live. corral serve speaks it over HTTP and the Redis protocol (FILLGET /
// FILLSET).
//
// The key's owner holds its lease, so there is one per key in the cluster. A lease ends
// when its value is stored, when it lapses (its fill duration passed), when a write of the
// key lands (Set, Remove, or another FillSet: the lease is revoked and its FillSet stores
// nothing), or when the key's owner changes in the owner's view (the new owner grants a
// lease of its own: at most one extra filler per ownership change, as for fills). A value
// stored by FillSet is a write like Set's — a version from the owner's clock, remembered,
// told to every member — with the lifetime the FillSet gives.
//
// Terms:
//   - placeholder: a lease without a token, granted while its caller looks for a copy
//     another member still holds (a warm pull): the others wait on it as on a lease;
//   - moved away: a key whose lease ended here because its owner changed; this node grants
//     none of it again until that lease would have lapsed.
//
// # Usage
//
//	t := lease.NewTable(cfg, store)  // one per group
//	ans, err := t.Acquire(ctx, key, fillFor, until) // the owner's side of Lease
//	version, err := t.Store(key, v, token, e, drawn) // the owner's side of FillSet
//	t.Revoke(key, version)           // a write of key landed
//	t.Moved(view)                    // every new view
//	t.Close()
package lease
