package corral

import (
	"fmt"
	"net/netip"
	"strings"
)

// A seed that names a service — "dns+name:port", the records of a headless Service, or
// "k8s://namespace/service", its EndpointSlices — names every member at one port: the one in
// the seed, or the EndpointSlices' gossip port. A node that is itself one of those members is
// found there by everyone else, so it must listen there. When it does not, it joins the
// others (if they listen there) but is never found by them; and when every replica makes the
// same mistake — the same code, a zero Config whose GossipPort 0 means a random port — no two
// replicas ever meet, and each is a one-node cluster that reports ready. That is the trap the
// rule below closes, in two halves:
//
//  1. Here, before anything binds: GossipPort 0 (a random port) with a dns+ or k8s:// seed
//     fails, unless the node gossips on a loopback address (tests and demos on one machine,
//     where several nodes share the address and a seed names one of them) or on an in-memory
//     network (corraltest). A random port can never be the port a service names.
//  2. In package peer, when New resolves the seeds (see peer/selfseed.go): a dns+ or k8s://
//     seed that resolves to this node's own advertised address at another port than the one it
//     advertises fails, again unless that address is loopback. This catches a fixed but wrong
//     port, as far as the records already hold this node when it starts; a record that appears
//     later is logged instead.
//
// Plain "host:port" seeds are exempt: they name one process, and a host may run several.

// checkSelfSeeds applies the first half of the rule to a node's gossip port, bind and advertise
// addresses as configured, and seeds; inMemory says it runs on an in-memory network. It takes
// the values rather than a Config so that it goes wherever the Config's validation goes.
func checkSelfSeeds(gossipPort int, bindAddr, advertiseAddr string, inMemory bool, join []string) error {
	if gossipPort != 0 || inMemory || isLoopback(bindAddr) || isLoopback(advertiseAddr) {
		return nil
	}
	for _, s := range join {
		var at, fix string
		switch {
		case strings.HasPrefix(s, "dns+"):
			i := strings.LastIndexByte(s, ':')
			if i < 0 {
				continue // malformed: package peer names what is wrong with it
			}
			at, fix = "port "+s[i+1:], "Set GossipPort to "+s[i+1:]
		case strings.HasPrefix(s, "k8s://"):
			at, fix = "the gossip port of its EndpointSlices", "Set GossipPort to the Service's gossip port"
		default:
			continue
		}
		return fmt.Errorf("corral: seed %q finds every member of its service at %s, this node included, but GossipPort 0 picks a random port: "+
			"no peer would find this node, and replicas that all do this never meet (each is a cluster of one). "+
			"%s; corral.DefaultConfig() sets GossipPort 7946 and PeerPort 7947, the ports of the chart's Service", s, at, fix)
	}
	return nil
}

// isLoopback reports whether s is a loopback IP address.
func isLoopback(s string) bool {
	ip, err := netip.ParseAddr(s)
	return err == nil && ip.IsLoopback()
}
