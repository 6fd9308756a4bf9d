package k8s

import (
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/corralcache/corral/peer"
)

// DefaultPortName is the EndpointSlice port whose number is joined when the target names no port:
// the chart's name for the gossip port over TCP.
const DefaultPortName = "tcp-gossip"

// addrsOf returns the gossip addresses of the slices' endpoints, as the package doc defines them:
// port is the target's port (a number or a name; "" = DefaultPortName, falling back to
// peer.DefaultPort), family the slices' address type ("" = IPv4 and IPv6).
func addrsOf(eps []*discoveryv1.EndpointSlice, port string, family discoveryv1.AddressType) []string {
	num, err := strconv.Atoi(port)
	if err != nil {
		num = 0
	}
	seen := make(map[netip.AddrPort]bool)
	var out []string
	for _, s := range eps {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 ||
			family != "" && s.AddressType != family {
			continue
		}
		p := num
		if p == 0 {
			p = slicePort(s, port)
		}
		if p < 1 || p > 65535 {
			continue // a named port this slice does not have, or a number no port has
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 || (e.Conditions.Terminating != nil && *e.Conditions.Terminating) {
				continue
			}
			ip, err := netip.ParseAddr(e.Addresses[0])
			if err != nil {
				continue
			}
			ap := netip.AddrPortFrom(ip.Unmap(), uint16(p))
			if !seen[ap] {
				seen[ap] = true
				out = append(out, ap.String())
			}
		}
	}
	slices.Sort(out)
	return out
}

// slicePort returns the number of the slice's TCP port called name ("" = DefaultPortName, which
// falls back to peer.DefaultPort), or 0 when there is none.
func slicePort(s *discoveryv1.EndpointSlice, name string) int {
	want := name
	if want == "" {
		want = DefaultPortName
	}
	for _, p := range s.Ports {
		if p.Name != nil && *p.Name == want && p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
			return int(*p.Port)
		}
	}
	if name == "" {
		return peer.DefaultPort
	}
	return 0
}
