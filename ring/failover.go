package ring

// Without returns the ring over the same members and config minus name: the
// ring every replica would build if name left. Its owner for a key is the
// failover target when name is unreachable, and every replica computes the
// same one. If name is not a member, Without returns r itself.
//
// The first call for a name builds the ring (as costly as New); later calls
// return the same *Ring without allocating. Concurrent first calls for one
// name wait for a single build. The memo lives as long as r, and holds at
// most Len() rings.
func (r *Ring) Without(name string) *Ring {
	i, ok := r.index(name)
	if !ok {
		return r
	}
	// Key the memo by our own copy of the name, not the caller's, so the
	// caller's string never escapes and a hit costs no allocation.
	canon := r.members[i]
	v, ok := r.without.Load(canon)
	if !ok {
		// Two first callers may both get here; LoadOrStore keeps one entry
		// and both use it, so they still share one build.
		v, _ = r.without.LoadOrStore(canon, new(derived))
	}
	d := v.(*derived)
	// Building under d.once, not under a lock over the whole memo, so
	// building the ring minus one member never holds up lookups of another.
	d.once.Do(func() {
		rest := make([]string, 0, len(r.members)-1)
		rest = append(rest, r.members[:i]...)
		rest = append(rest, r.members[i+1:]...)
		d.ring = build(rest, r.cfg)
	})
	return d.ring
}

// Successor returns the owner of key on the ring without every failed name:
// the member to ask when the owner and the earlier successors are
// unreachable. Names that are not members are ignored, as are repeats. It
// returns "" if no member is left. With no failed names it is Owner.
//
// Successor removes the failed names in sorted order, whatever order they
// are given in, so a failure set maps onto one memoized chain of Without
// rings; once that chain is built, Successor allocates nothing.
func (r *Ring) Successor(key string, failed ...string) string {
	cur := r
	// Pick the failed names in ascending order by selection: O(len²), but
	// the list is a handful of names and this neither sorts nor copies the
	// caller's slice. last starts at "", which is never a member, so
	// skipping it (and every name ≤ last, i.e. repeats) loses nothing.
	last := ""
	for cur.Len() > 0 {
		next, found := "", false
		for _, f := range failed {
			if f > last && (!found || f < next) {
				next, found = f, true
			}
		}
		if !found {
			break
		}
		cur = cur.Without(next)
		last = next
	}
	return cur.Owner(key)
}
