package clientlease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/limithits"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
)

// Leases grants leases within Limits, and bounds the leases each client holds through this
// node. A lease counts from its grant until a FillSet with its token passes through this node
// (Stored) or its fill time is up: a lease revoked by a write, or stored through another node,
// counts until then, which errs on the side of the bound. It is safe for concurrent use.
type Leases struct {
	lim  Limits
	hits *limithits.Counter

	mu sync.Mutex // guards byClient, owner and swept
	// byClient holds, per client, its slots being granted and the expiry of each token.
	byClient map[string]*holder
	owner    map[string]string // token → client
	swept    time.Time         // when every client's expired leases were last dropped
}

type holder struct {
	granting int                  // Lease calls in progress
	tokens   map[string]time.Time // token → when its fill time is up
}

// New returns Leases bounded by lim, whose refusals count in hits (nil: not counted). It
// refuses limits that Validate refuses.
func New(lim Limits, hits *limithits.Counter) (*Leases, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	return &Leases{lim: lim, hits: hits, byClient: map[string]*holder{}, owner: map[string]string{}, swept: time.Now()}, nil
}

// FullError is a lease refused because a table is full: the client's leases
// (MaxClientLeases), or the owner's table of the group. Lease returns it.
type FullError struct {
	Client bool // the client's bound, not the owner's table
	msg    string
}

func (e *FullError) Error() string { return e.msg }

// ClientOf is the client a per-client bound counts: the host of its connection's remote
// address, what a client cannot choose. (Behind a proxy every request has the proxy's: give
// the proxy its own bound.)
func ClientOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// Check refuses a fill time past MaxLease, and counts it (lease_time).
func (ls *Leases) Check(fill time.Duration) error {
	if fill > ls.lim.MaxLease {
		ls.hits.Hit(limithits.LeaseTime)
		return fmt.Errorf("a lease of %v exceeds the limit of %v (--max-lease)", fill, ls.lim.MaxLease)
	}
	return nil
}

// Lease calls g.Lease for client within its bound. A full table, the client's or the
// owner's, is a *FullError (counted: client_leases, leases_full); g.Lease's other errors
// pass through. Check o.Fill first: Lease does not.
func (ls *Leases) Lease(ctx context.Context, g *corral.Group[objects.Object], client, key string, o corral.LeaseOptions) (corral.Lease[objects.Object], error) {
	if ls.lim.MaxClientLeases == 0 {
		return ls.leaseFrom(ctx, g, key, o)
	}
	if !ls.reserve(client) {
		ls.hits.Hit(limithits.ClientLeases)
		return corral.Lease[objects.Object]{}, &FullError{Client: true,
			msg: fmt.Sprintf("this client holds %d leases, the limit (--max-client-leases): store or let some lapse first", ls.lim.MaxClientLeases)}
	}
	l, err := ls.leaseFrom(ctx, g, key, o)
	ls.settle(client, l.Token, time.Now().Add(o.Fill))
	return l, err
}

// leaseFrom calls g.Lease, and maps a full table to a *FullError.
func (ls *Leases) leaseFrom(ctx context.Context, g *corral.Group[objects.Object], key string, o corral.LeaseOptions) (corral.Lease[objects.Object], error) {
	l, err := g.Lease(ctx, key, o)
	if errors.Is(err, corral.ErrTooManyLeases) {
		ls.hits.Hit(limithits.LeasesFull)
		return l, &FullError{msg: strings.TrimPrefix(err.Error(), "corral: ") + ": try again when leases end"}
	}
	return l, err
}

// reserve takes a slot for a Lease call of client, if it has one left.
func (ls *Leases) reserve(client string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := time.Now()
	// Clients that went away leave expired tokens: drop them all now and then.
	if now.Sub(ls.swept) > time.Minute {
		for c, h := range ls.byClient {
			ls.dropExpiredLocked(h, now)
			if h.granting == 0 && len(h.tokens) == 0 {
				delete(ls.byClient, c)
			}
		}
		ls.swept = now
	}
	h := ls.byClient[client]
	if h == nil {
		h = &holder{tokens: map[string]time.Time{}}
		ls.byClient[client] = h
	}
	if h.granting+len(h.tokens) >= ls.lim.MaxClientLeases {
		// At the bound, and only then, look for leases whose time is up: a scan of at most
		// MaxClientLeases tokens.
		ls.dropExpiredLocked(h, now)
		if h.granting+len(h.tokens) >= ls.lim.MaxClientLeases {
			return false
		}
	}
	h.granting++
	return true
}

// settle ends a Lease call of client's: token, if one was granted, counts until expires.
func (ls *Leases) settle(client, token string, expires time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	h := ls.byClient[client]
	h.granting--
	if token != "" {
		h.tokens[token] = expires
		ls.owner[token] = client
	}
	if h.granting == 0 && len(h.tokens) == 0 {
		delete(ls.byClient, client)
	}
}

// Stored drops token, whose FillSet passed through this node (stored or not: either way it
// is no longer live).
func (ls *Leases) Stored(token string) {
	if ls.lim.MaxClientLeases == 0 {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	client, ok := ls.owner[token]
	if !ok {
		return
	}
	delete(ls.owner, token)
	if h := ls.byClient[client]; h != nil {
		delete(h.tokens, token)
		if h.granting == 0 && len(h.tokens) == 0 {
			delete(ls.byClient, client)
		}
	}
}

// dropExpiredLocked drops h's tokens whose time is up.
func (ls *Leases) dropExpiredLocked(h *holder, now time.Time) {
	for tok, exp := range h.tokens {
		if !now.Before(exp) {
			delete(h.tokens, tok)
			delete(ls.owner, tok)
		}
	}
}

// Held is how many leases client holds, as the bound counts them.
func (ls *Leases) Held(client string) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if h := ls.byClient[client]; h != nil {
		return len(h.tokens)
	}
	return 0
}
