package peer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"
)

// errNoSeedAddr is reported when the seeds resolve to no address but this member's own.
var errNoSeedAddr = errors.New("no seed address other than this member's")

// Join looks seeds up now and joins every address found (except this member's own), each with a
// full state exchange, in parallel. It returns how many addresses were reached, and an error
// only when none was: the errors of every address — a *JoinRefusedError for one that was
// reached and turned the join away, saying why as far as this member can tell — or ctx's
// error when ctx ended first (the exchanges still running then go on in the background, and
// may still join). Seeds take the
// forms of Config.Seeds. They are not added to the seeds the background loop re-joins: the
// discovery of a "scheme://" seed runs only until Join returns.
func (m *Membership) Join(ctx context.Context, seeds []string) (int, error) {
	parsed, err := parseSeeds(seeds)
	if err != nil {
		return 0, err
	}
	m.lifeMu.Lock()
	err = m.checkLiveLocked()
	m.lifeMu.Unlock()
	if err != nil {
		return 0, err
	}
	dctx, stop := context.WithCancel(m.ctx)
	defer stop()
	if err := m.runDiscoveries(dctx, parsed); err != nil {
		return 0, err
	}
	return m.join(ctx, parsed, false, false)
}

// joinSeeds joins the configured seeds; with skipMembers, only addresses that are not members.
// The first call starts the seeds' discoveries, which run until Close. With strict (New's
// attempt), a seed that names this member at another port (see selfseed.go) fails it before
// any address is joined.
func (m *Membership) joinSeeds(ctx context.Context, skipMembers, strict bool) (int, error) {
	if err := m.runDiscoveries(m.ctx, m.s.seeds); err != nil {
		return 0, err
	}
	return m.join(ctx, m.s.seeds, skipMembers, strict)
}

func (m *Membership) join(ctx context.Context, seeds []seed, skipMembers, strict bool) (int, error) {
	var selfErr error
	addrs, resolveErr := resolveSeeds(ctx, m.s.Resolver, seeds, func(sd seed, found []netip.AddrPort) {
		if selfErr == nil {
			selfErr = checkSelfSeed(sd, found, addrPort(m.gossipAddr))
		}
	})
	if selfErr != nil {
		if strict {
			return 0, selfErr
		}
		if !m.warnedSelfSeed.Swap(true) {
			m.log.Error("a seed names this member at a port where it does not listen; members that find it through the seed cannot reach it",
				"member", m.s.Name, "err", selfErr)
		}
	}

	skip := map[netip.AddrPort]bool{addrPort(m.gossipAddr): true}
	if skipMembers {
		for _, mem := range m.view.list() {
			skip[addrPort(mem.GossipAddr)] = true
		}
	}
	targets := addrs[:0]
	for _, a := range addrs {
		if !skip[addrPort(a)] {
			targets = append(targets, a)
		}
	}
	if len(targets) == 0 {
		if skipMembers && len(addrs) > 0 {
			return 0, resolveErr // every seed is a member: nothing to heal
		}
		return 0, errors.Join(resolveErr, errNoSeedAddr)
	}

	n, err := m.joinAddrs(ctx, targets)
	if n > 0 {
		return n, nil
	}
	return 0, errors.Join(resolveErr, err)
}

// addrPort parses an "ip:port" this package produced; anything else becomes the zero value,
// which matches no address.
func addrPort(s string) netip.AddrPort {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// joinAddrs runs memberlist's join (a TCP state exchange) with every address in parallel, so an
// unresponsive address does not hold up the others; memberlist's own Join takes them one after
// the other. Each exchange is bounded by StreamTimeout, and cut short by Close.
func (m *Membership) joinAddrs(ctx context.Context, addrs []string) (int, error) {
	m.lifeMu.Lock()
	if m.closed {
		m.lifeMu.Unlock()
		return 0, ErrClosed
	}
	// Buffered for every worker, so that a worker whose caller has stopped listening (ctx ended)
	// still finishes without blocking.
	results := make(chan error, len(addrs))
	for _, a := range addrs {
		m.wg.Go(func() {
			_, err := m.ml.Join([]string{a})
			results <- m.joinResult(a, singleError(err))
		})
	}
	m.lifeMu.Unlock()

	n := 0
	var errs []error
	for range addrs {
		select {
		case err := <-results:
			if err != nil {
				errs = append(errs, err)
			} else {
				n++
			}
		case <-ctx.Done():
			if n > 0 {
				return n, nil
			}
			return 0, fmt.Errorf("join: %w", ctx.Err())
		}
	}
	if n > 0 {
		return n, nil
	}
	return 0, errors.Join(errs...)
}

// singleError unwraps the one error of the go-multierror that memberlist's Join returns for one
// address, whose text spreads over several lines; it already names the address.
func singleError(err error) error {
	var multi interface{ WrappedErrors() []error }
	if errors.As(err, &multi) {
		if errs := multi.WrappedErrors(); len(errs) == 1 {
			return errs[0]
		}
	}
	return err
}

// joinLoop runs until Close. While no seed has been reached (and no member has joined this
// one), it retries with backoff; afterwards it re-joins the seeds that are not members every
// RejoinInterval, or stops if that is negative. A discovery that finds new addresses wakes it at
// once, so a pod that appears in a Service's EndpointSlices is joined within a round trip rather
// than a RejoinInterval later.
func (m *Membership) joinLoop(reached bool) {
	s := m.s
	changed := seedChanges(s.seeds)
	r := s.Rand
	if r == nil {
		r = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	b := newBackoff(s.JoinBackoffMin, s.JoinBackoffMax, r)
	for {
		var wait time.Duration
		switch {
		case !reached:
			wait = b.next()
		case s.RejoinInterval >= 0:
			wait = s.RejoinInterval
		case changed == nil:
			return
		default:
			wait = -1 // only discoveries wake the loop
		}
		if !m.sleep(wait, changed) {
			return
		}

		if !reached && m.view.len() > 1 {
			// Another member joined this one: that is a cluster, and re-joining will take
			// care of any seed it does not include.
			reached = true
			continue
		}
		ctx, cancel := context.WithTimeout(m.ctx, s.JoinTimeout)
		n, err := m.joinSeeds(ctx, reached, false)
		cancel()
		if m.ctx.Err() != nil {
			return
		}
		switch {
		case n > 0 && !reached:
			reached = true
			m.log.Info("joined cluster", "member", s.Name, "seeds_reached", n, "members", m.view.len())
		case n > 0:
			m.log.Info("re-joined seeds that were not members", "member", s.Name, "seeds_reached", n, "members", m.view.len())
		case err != nil:
			m.log.Debug("join attempt failed", "member", s.Name, "seeds", s.Seeds, "err", err)
		}
	}
}

// sleep waits d (forever when negative) or until wake receives, and reports false if Close came
// first.
func (m *Membership) sleep(d time.Duration, wake <-chan struct{}) bool {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-wake:
		return true
	case <-m.ctx.Done():
		return false
	}
}

// reconnectLoop runs until Close: about every ReconnectInterval it pings one member, drawn at
// random, of those that failed in the last ReconnectWindow, and when it answers runs a full
// state exchange with it. That is how the two sides of a healed partition find each other: each
// side declared the other dead, and memberlist probes and exchanges state only with members it
// holds live. When the exchange reaches a member, each side learns the other holds it dead,
// refutes that, and gossip spreads the refutations. One ping or exchange is in flight at a time; an exchange is refused when
// the address answers with another member's name.
func (m *Membership) reconnectLoop(r *rand.Rand) {
	s := m.s
	for {
		wait := s.ReconnectInterval/2 + time.Duration(r.Int64N(int64(s.ReconnectInterval/2)+1))
		if !m.sleep(wait, nil) {
			return
		}
		fs := m.view.failedSince(time.Now().Add(-s.ReconnectWindow))
		if len(fs) == 0 {
			continue
		}
		f := fs[r.IntN(len(fs))]
		// First a ping by name, answered only by a process of that name and bounded by
		// ProbeTimeout: an address with no one behind it costs no TCP dial, and one that
		// another process has taken (a pod's IP is reused) gets none of this member's state.
		udp, err := net.ResolveUDPAddr("udp", f.addr)
		if err != nil {
			continue
		}
		if _, err := m.ml.Ping(f.name, udp); err != nil {
			continue
		}
		// Should the address change hands between the ping and the exchange, the merge is
		// refused unless whoever answers there is the member that failed.
		m.del.expect(f.addr, f.name)
		_, err = m.joinAddrs(m.ctx, []string{f.addr})
		m.del.expect("", "")
		if err == nil {
			m.log.Debug("reached a failed member", "member", s.Name, "failed", f.name, "addr", f.addr, "members", m.view.len())
		}
	}
}
