package peer

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// FuzzParseSeed feeds a seed string, as --join or CORRAL_JOIN gives it, and a DNS answer for
// its name (comma-separated, as a resolver could return anything) to parseSeed and
// resolveSeeds. A seed that parses has a port in 1-65535 and an IP address or a DNS name
// (as Go's resolver takes one), an IP seed is no "dns+" seed, and its canonical form
// "host:port" parses back to the same seed; every
// address resolved from it is a distinct "ip:port" with the seed's port and no IPv4-mapped
// IPv6 address.
func FuzzParseSeed(f *testing.F) {
	f.Fuzz(func(t *testing.T, s, answer string) {
		sd, err := parseSeed(s)
		if err != nil {
			if sd.disc != nil {
				t.Fatalf("parseSeed(%q) failed (%v) but opened a discovery", s, err)
			}
			return
		}
		if sd.disc != nil {
			t.Fatalf("parseSeed(%q) opened a discovery, and no scheme is registered here", s)
		}
		if sd.raw != s || sd.host == "" || sd.port == 0 {
			t.Fatalf("parseSeed(%q) = %+v", s, sd)
		}
		if !sd.ip.IsValid() && !plainDNSName(sd.host) {
			t.Fatalf("parseSeed(%q) took the host %q, which is no DNS name", s, sd.host)
		}
		if sd.ip.IsValid() {
			if strings.HasPrefix(s, dnsScheme) {
				t.Fatalf("parseSeed(%q) took a dns+ seed of an IP address", s)
			}
			if ip, err := netip.ParseAddr(sd.host); err != nil || ip.Unmap() != sd.ip {
				t.Fatalf("parseSeed(%q): ip %v is not the host %q", s, sd.ip, sd.host)
			}
		}
		canon := net.JoinHostPort(sd.host, strconv.Itoa(int(sd.port)))
		again, err := parseSeed(canon)
		if err != nil || again.host != sd.host || again.port != sd.port || again.ip != sd.ip {
			t.Fatalf("parseSeed(%q) = %+v, but its canonical form %q parses as %+v, %v", s, sd, canon, again, err)
		}

		r := &StaticResolver{}
		r.Set(sd.host, strings.Split(answer, ",")...)
		addrs, _ := resolveSeeds(context.Background(), r, []seed{sd}, nil)
		seen := map[string]bool{}
		for _, a := range addrs {
			ap, err := netip.ParseAddrPort(a)
			switch {
			case err != nil:
				t.Fatalf("seed %q, answer %q: address %q: %v", s, answer, a, err)
			case ap.Port() != sd.port:
				t.Fatalf("seed %q, answer %q: address %q has not the seed's port %d", s, answer, a, sd.port)
			case ap.Addr().Is4In6():
				t.Fatalf("seed %q, answer %q: address %q is IPv4-mapped", s, answer, a)
			case seen[a]:
				t.Fatalf("seed %q, answer %q: address %q twice in %q", s, answer, a, addrs)
			}
			seen[a] = true
		}
		if sd.ip.IsValid() && len(addrs) != 1 {
			t.Fatalf("IP seed %q resolved to %q", s, addrs)
		}
	})
}

// plainDNSName is a plain reading of RFC 1123's host names, with '_' as Go's resolver takes
// it: labels of letters, digits, '-' and '_', 1-63 bytes, no '-' at either end, 253 bytes in
// all (254 with a final dot), and a letter, '-' or '_' somewhere.
func plainDNSName(s string) bool {
	if len(s) > 254 || len(s) == 254 && s[253] != '.' {
		return false
	}
	labels := strings.Split(s, ".")
	if len(labels) > 1 && labels[len(labels)-1] == "" {
		labels = labels[:len(labels)-1] // the final dot
	}
	letter := false
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return false
		}
		for _, r := range l {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '_':
				letter = true
			case r >= '0' && r <= '9':
			default:
				return false
			}
		}
	}
	return letter
}

// seedSeeds are FuzzParseSeed's seed corpus.
func seedSeeds() []fuzzcorpus.Seed {
	seed := func(name, s, answer string) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{s, answer}}
	}
	pods := "10.0.0.8,10.0.0.9,fd00::2"
	return []fuzzcorpus.Seed{
		seed("ipv4", "10.0.0.7:7946", ""),
		seed("ipv6", "[fd00::1]:7946", ""),
		seed("ipv6-zone", "[fe80::1%eth0]:7946", ""),
		seed("ipv4-mapped", "[::ffff:10.0.0.7]:7946", ""),
		seed("name", "corral-0.corral.default.svc:7946", "10.0.0.8"),
		seed("dns-headless", "dns+corral-gossip.default.svc.cluster.local:7946", pods),
		seed("dns-hostile-answer", "dns+corral:7946", "10.0.0.8,10.0.0.8,::ffff:10.0.0.8,not-an-ip,,fe80::1%eth0,[fd00::3]:80,999.1.1.1"),
		seed("dns-ip", "dns+10.0.0.1:7946", ""),
		seed("dns-empty", "dns+:7946", ""),
		seed("k8s", "k8s://default/corral", ""),
		seed("k8s-own-namespace", "k8s://corral:tcp-gossip", ""),
		seed("other-scheme", "consul+corral:8500", ""),
		seed("url", "http://corral:7946/", ""),
		seed("no-port", "corral", ""),
		seed("port-zero", "corral:0", ""),
		seed("port-too-large", "corral:65536", ""),
		seed("port-signed", "corral:+7946", ""),
		seed("empty-host", ":7946", ""),
		seed("brackets-name", "[corral]:7946", "10.0.0.8"),
		seed("name-bad-chars", "dns+corral gossip/x:7946", ""),
		seed("name-numeric", "10.0.0:7946", ""),
		seed("name-fqdn", "corral.default.svc.cluster.local.:7946", "10.0.0.8"),
		seed("empty", "", ""),
	}
}
