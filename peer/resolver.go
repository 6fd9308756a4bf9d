package peer

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
)

// Resolver looks up the addresses of a host name. *net.Resolver implements it.
//
// LookupHost may be called by several goroutines at once.
type Resolver interface {
	// LookupHost returns the host's addresses (IP literals; entries that are not are skipped),
	// all A and AAAA records for a DNS name.
	LookupHost(ctx context.Context, host string) (addrs []string, err error)
}

var _ Resolver = (*net.Resolver)(nil)

// StaticResolver is an in-memory Resolver for tests and for fixed topologies: it answers from a
// table that can be changed while it is in use, as DNS records change when pods come and go.
// The zero value answers every name with an error, like a name that does not exist.
type StaticResolver struct {
	mu sync.Mutex
	// guards hosts
	hosts map[string][]string
}

var _ Resolver = (*StaticResolver)(nil)

// Set makes LookupHost(host) answer addrs from now on. No addrs makes the name unknown again.
func (r *StaticResolver) Set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(addrs) == 0 {
		delete(r.hosts, host)
		return
	}
	if r.hosts == nil {
		r.hosts = make(map[string][]string)
	}
	r.hosts[host] = slices.Clone(addrs)
}

// LookupHost returns what Set last gave for host, or a *net.DNSError with IsNotFound.
func (r *StaticResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs, ok := r.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: fmt.Sprintf("no such host in %T", r), Name: host, IsNotFound: true}
	}
	return slices.Clone(addrs), nil
}
