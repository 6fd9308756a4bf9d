package peer

import (
	"fmt"
	"net/netip"
	"strings"
)

// A seed that names a service — "dns+name:port", the records of a headless Service, or
// "k8s://namespace/service", its EndpointSlices — names every member of the service at one
// port. A member that finds its own address among them, at another port than the one it is
// reached at, is one of those members and is not where the seed tells everyone else to look:
// it joins the others (if they listen there) but is never found by them, and when every
// member makes the same mistake — the same code, the same wrong port — none ever meets
// another. New fails then; a later join attempt that first sees it
// (the record appeared after New) logs it, once, and joins the other addresses all the same.
//
// Loopback addresses are exempt: several processes on one machine share them, and a seed that
// names one of them names another process, not this one. So are "host:port" seeds: a host may
// run several members, on several ports, and such a seed names one of them. Schemes other than
// k8s:// are exempt too: a Discoverer of one's own may well list several members per address.

// selfSeedError is returned by New when a "dns+" or "k8s://" seed resolves to this member's
// own advertised address at another port.
type selfSeedError struct {
	Seed  string         // the seed, as configured
	Found netip.AddrPort // what it resolved to: this member's address, another port
	Self  netip.AddrPort // where this member is reached (its advertised address and port)
}

func (e *selfSeedError) Error() string {
	return fmt.Sprintf("peer: seed %q names this member's own address at port %d (%s), but it is reached at port %d: "+
		"the members that find it through the seed dial a port where it does not listen. Listen on port %d, where the seed says every member is",
		e.Seed, e.Found.Port(), e.Found, e.Self.Port(), e.Found.Port())
}

// checkSelfSeed returns a *selfSeedError when sd, a seed that names a service, resolved (to
// found) to self's address at another port.
func checkSelfSeed(sd seed, found []netip.AddrPort, self netip.AddrPort) error {
	service := strings.HasPrefix(sd.raw, dnsScheme) || strings.HasPrefix(sd.raw, "k8s://")
	if !service || !self.IsValid() || self.Addr().IsLoopback() {
		return nil
	}
	for _, ap := range found {
		if ap.Addr() == self.Addr() && ap.Port() != self.Port() {
			return &selfSeedError{Seed: sd.raw, Found: ap, Self: self}
		}
	}
	return nil
}
