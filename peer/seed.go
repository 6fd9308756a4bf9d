package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// dnsScheme is the prefix of a seed that names a DNS name with many records, such as a
// Kubernetes headless Service.
const dnsScheme = "dns+"

// seed is one parsed entry of Config.Seeds.
type seed struct {
	raw  string // as given, for logs and errors
	host string // IP literal or DNS name
	port uint16
	// ip is the parsed host when it is an IP literal: such a seed is never looked up.
	ip netip.Addr
	// disc finds the addresses of a seed "scheme://target" of a registered scheme (see
	// RegisterScheme); host and port are then unset.
	disc *discovery
}

// parseSeed accepts "host:port", "[ipv6]:port" and "dns+name:port", where a name is a DNS name
// (see isDNSName) and the port a number in 1-65535. Both name forms are looked up
// with the Resolver on every join attempt and every address found is joined; the "dns+" prefix
// only says that the name is expected to have many records. The port is required: guessing this
// member's own port (what memberlist does) is wrong as soon as members use different ports.
// "scheme://target" is accepted for a scheme registered with RegisterScheme, whose open checks
// target.
func parseSeed(s string) (seed, error) {
	sd := seed{raw: s}
	rest := s
	if strings.HasPrefix(rest, dnsScheme) {
		rest = rest[len(dnsScheme):]
	} else if scheme, target, ok := strings.Cut(rest, "://"); ok {
		ds, err := openScheme(s, scheme, target)
		sd.disc = ds
		return sd, err
	} else if scheme, _, ok := strings.Cut(rest, "+"); ok && !strings.ContainsAny(scheme, ":[]") {
		return sd, fmt.Errorf("peer: seed %q: scheme %q is not supported (use host:port or dns+name:port)", s, scheme+"+")
	}
	host, portStr, err := net.SplitHostPort(rest)
	if err != nil {
		return sd, fmt.Errorf("peer: seed %q: %w", s, err)
	}
	if host == "" {
		return sd, fmt.Errorf("peer: seed %q: empty host", s)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return sd, fmt.Errorf("peer: seed %q: port %q is not in 1-65535", s, portStr)
	}
	sd.host, sd.port = host, uint16(port)
	if ip, err := netip.ParseAddr(host); err == nil {
		if strings.HasPrefix(s, dnsScheme) {
			return sd, fmt.Errorf("peer: seed %q: dns+ needs a name, not an IP address", s)
		}
		sd.ip = ip.Unmap()
	} else if !isDNSName(host) {
		// Refused here, not at every join attempt with a lookup error.
		return sd, fmt.Errorf("peer: seed %q: %q is neither an IP address nor a DNS name", s, host)
	}
	return sd, nil
}

// isDNSName reports whether s is a name a resolver looks up (Go's own resolver refuses the
// others): dot-separated labels of letters, digits, '-' and '_', each of 1-63 bytes and
// neither starting nor ending with '-', not all digits, 253 bytes at most, with an optional
// final dot.
func isDNSName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 || strings.Trim(s, "0123456789.") == "" {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// parseSeeds parses every seed, reporting every bad one. The discoveries of its seeds share one
// changed channel (see seedChanges).
func parseSeeds(ss []string) ([]seed, error) {
	seeds := make([]seed, 0, len(ss))
	var errs []error
	var changed chan struct{}
	for _, s := range ss {
		sd, err := parseSeed(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sd.disc != nil {
			if changed == nil {
				changed = make(chan struct{}, 1)
			}
			sd.disc.changed = changed
		}
		seeds = append(seeds, sd)
	}
	return seeds, errors.Join(errs...)
}

// resolveSeeds turns seeds into distinct "ip:port" addresses, looking names up with r now and
// taking the addresses a seed's discovery found last (waiting for its first answer until ctx
// ends). A seed that fails to resolve is reported in err, but the addresses of the other seeds are
// still returned. each, if not nil, is called with every seed and the addresses it resolved to.
func resolveSeeds(ctx context.Context, r Resolver, seeds []seed, each func(sd seed, found []netip.AddrPort)) (addrs []string, err error) {
	seen := make(map[netip.AddrPort]bool)
	var errs []error
	for _, sd := range seeds {
		found, err := resolveSeed(ctx, r, sd)
		if err != nil {
			errs = append(errs, err)
		}
		if each != nil {
			each(sd, found)
		}
		for _, ap := range found {
			if !seen[ap] {
				seen[ap] = true
				addrs = append(addrs, ap.String())
			}
		}
	}
	return addrs, errors.Join(errs...)
}

// resolveSeed returns the addresses sd names now (see resolveSeeds), IPv4-mapped IPv6 addresses
// unmapped.
func resolveSeed(ctx context.Context, r Resolver, sd seed) ([]netip.AddrPort, error) {
	var found []netip.AddrPort
	if sd.disc != nil {
		addrs, err := sd.disc.current(ctx)
		for _, a := range addrs {
			if ap, err := netip.ParseAddrPort(a); err == nil {
				found = append(found, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
			}
		}
		return found, err
	}
	if sd.ip.IsValid() {
		return []netip.AddrPort{netip.AddrPortFrom(sd.ip, sd.port)}, nil
	}
	hosts, err := r.LookupHost(ctx, sd.host)
	if err != nil {
		return nil, fmt.Errorf("resolve seed %q: %w", sd.raw, err)
	}
	for _, h := range hosts {
		if ip, err := netip.ParseAddr(h); err == nil {
			found = append(found, netip.AddrPortFrom(ip.Unmap(), sd.port))
		}
	}
	return found, nil
}
