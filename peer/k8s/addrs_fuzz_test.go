package k8s

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/corralcache/corral/internal/fuzzcorpus"
	"github.com/corralcache/corral/peer"
)

// FuzzAddrsOf feeds an EndpointSlice, as JSON from the API server, to addrsOf, with a target
// port and an address family as a Discoverer has them (checked by New). The addresses are
// those a deliberately plain reading of the package doc gives: for each slice of the family,
// the target's port number, else the number of the slice's TCP port of the target's name
// (DefaultPortName when it names none, then peer.DefaultPort), skipping a slice without one
// or with a number outside 1-65535; for each endpoint not terminating, its first address
// when it is an IP; distinct and sorted.
func FuzzAddrsOf(f *testing.F) {
	f.Fuzz(func(t *testing.T, sliceJSON []byte, port string, family byte) {
		var s discoveryv1.EndpointSlice
		if json.Unmarshal(sliceJSON, &s) != nil {
			return
		}
		if (Config{Service: "corral", Port: port}).checkNames() != nil {
			port = "" // New refuses it
		}
		fam := [...]discoveryv1.AddressType{"", discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}[int(family)%3]
		got := addrsOf([]*discoveryv1.EndpointSlice{&s}, port, fam)
		if want := plainAddrsOf(&s, port, fam); !slices.Equal(got, want) {
			t.Fatalf("addrsOf(%s, port %q, family %q) = %q, want %q", sliceJSON, port, fam, got, want)
		}
	})
}

func plainAddrsOf(s *discoveryv1.EndpointSlice, port string, family discoveryv1.AddressType) []string {
	if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
		return nil
	}
	if family != "" && s.AddressType != family {
		return nil
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		p = 0
		name, found := port, false
		if name == "" {
			name = DefaultPortName
		}
		for _, sp := range s.Ports {
			tcp := sp.Protocol == nil || *sp.Protocol == corev1.ProtocolTCP
			if sp.Name != nil && *sp.Name == name && sp.Port != nil && tcp {
				p, found = int(*sp.Port), true
				break
			}
		}
		if !found && port == "" {
			p = peer.DefaultPort
		}
	}
	if p < 1 || p > 65535 {
		return nil
	}
	var out []string
	for _, e := range s.Endpoints {
		if len(e.Addresses) == 0 || e.Conditions.Terminating != nil && *e.Conditions.Terminating {
			continue
		}
		ip, err := netip.ParseAddr(e.Addresses[0])
		if err != nil {
			continue
		}
		if a := netip.AddrPortFrom(ip.Unmap(), uint16(p)).String(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// addrsSeeds are FuzzAddrsOf's seed corpus: slices as the API server serves them, and ones
// it would not.
func addrsSeeds() []fuzzcorpus.Seed {
	seed := func(name, sliceJSON, port string, family byte) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{[]byte(sliceJSON), port, family}}
	}
	v4 := `{"metadata":{"name":"corral-abcde","namespace":"default","labels":{"kubernetes.io/service-name":"corral"}},` +
		`"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":7946,"protocol":"TCP"},{"name":"grpc-peer","port":7947,"protocol":"TCP"}],` +
		`"endpoints":[{"addresses":["10.0.0.7"],"conditions":{"ready":true,"serving":true,"terminating":false},"targetRef":{"kind":"Pod","name":"corral-0"}},` +
		`{"addresses":["10.0.0.8"],"conditions":{"ready":false,"serving":true,"terminating":true}},` +
		`{"addresses":["10.0.0.9","10.0.0.10"],"conditions":{"ready":false}}]}`
	v6 := `{"addressType":"IPv6","ports":[{"name":"tcp-gossip","port":7946}],"endpoints":[{"addresses":["fd00::7"]},{"addresses":["::ffff:10.0.0.7"]}]}`
	return []fuzzcorpus.Seed{
		seed("ipv4", v4, "", 0),
		seed("ipv4-named-port", v4, "grpc-peer", 1),
		seed("ipv4-number", v4, "7000", 0),
		seed("ipv4-other-family", v4, "", 2),
		seed("ipv6", v6, "", 2),
		seed("fqdn", `{"addressType":"FQDN","endpoints":[{"addresses":["corral-0.example"]}]}`, "", 0),
		seed("no-ports", `{"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.7"]}]}`, "", 0),
		seed("udp-port", `{"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":7946,"protocol":"UDP"}],"endpoints":[{"addresses":["10.0.0.7"]}]}`, "", 0),
		seed("port-out-of-range", `{"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":70000}],"endpoints":[{"addresses":["10.0.0.7"]}]}`, "", 0),
		seed("port-negative", `{"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":-1}],"endpoints":[{"addresses":["10.0.0.7"]}]}`, "", 0),
		seed("port-null", `{"addressType":"IPv4","ports":[{"name":"tcp-gossip","port":null}],"endpoints":[{"addresses":["10.0.0.7"]}]}`, "", 0),
		seed("bad-addresses", `{"addressType":"IPv4","endpoints":[{"addresses":[]},{"addresses":["10.0.0.300"]},{"addresses":["fe80::1%eth0"]},{}]}`, "", 0),
		seed("not-an-object", `[1,2,3]`, "", 0),
	}
}
