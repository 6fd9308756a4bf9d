package ring

// Shares returns the fraction of partitions each member owns, which is the
// expected fraction of keys it owns. Every member is in the map, and the
// fractions sum to 1 (within float rounding). It is empty for an empty ring.
// Bounded loads guarantee no share exceeds ceil(Load × P / Len()) / P for P
// partitions.
func (r *Ring) Shares() map[string]float64 {
	shares := make(map[string]float64, r.Len())
	if r.Len() == 0 {
		return shares
	}
	counts := make(map[string]int, len(r.members))
	for _, m := range r.owners {
		counts[m]++
	}
	for _, m := range r.members {
		shares[m] = float64(counts[m]) / float64(len(r.owners))
	}
	return shares
}

// Moved returns the fraction of keys whose owner differs between r and
// other, for reporting how much a membership change moves. It is 0 for
// rings that route alike and 1 when exactly one of them is empty (every key
// goes from no owner to some owner). Rings with the same PartitionCount are
// compared partition by partition. Rings with different partition counts
// are compared exactly too: a key's pair of partitions (h mod P1, h mod P2)
// is uniform over the pairs that agree modulo gcd(P1, P2), so Moved counts
// owner disagreements over those pairs.
func (r *Ring) Moved(other *Ring) float64 {
	switch a, b := r.Len() == 0, other.Len() == 0; {
	case a && b:
		return 0
	case a || b:
		return 1
	}
	p1, p2 := len(r.owners), len(other.owners)
	if p1 == p2 {
		moved := 0
		for p, m := range r.owners {
			if other.owners[p] != m {
				moved++
			}
		}
		return float64(moved) / float64(p1)
	}
	// Same owner pairs = Σ over residues c mod g, over members m, of
	// (#partitions a ≡ c of r owned by m) × (#partitions b ≡ c of other
	// owned by m). Each residue class holds (p1/g)(p2/g) pairs, g classes.
	g := gcd(p1, p2)
	type classOwner struct {
		class int
		owner string
	}
	counts := make(map[classOwner]int)
	for a, m := range r.owners {
		counts[classOwner{a % g, m}]++
	}
	same := 0
	for b, m := range other.owners {
		same += counts[classOwner{b % g, m}]
	}
	pairs := float64(p1/g) * float64(p2/g) * float64(g)
	return 1 - float64(same)/pairs
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
