package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrClosed is returned by Join, Leave and UpdateMeta after Close.
var ErrClosed = errors.New("peer: membership closed")

// ErrLeft is returned by Join and UpdateMeta after Leave.
var ErrLeft = errors.New("peer: membership left the cluster")

// maxWait bounds Leave and UpdateMeta when their ctx has no deadline: memberlist's waits take a
// timeout, not a channel, so a ctx that is only cancelled cannot end them.
const maxWait = 10 * time.Second

// Membership is this process's membership in a gossip cluster. Its methods may be called from
// several goroutines at once.
type Membership struct {
	s          settings
	log        *slog.Logger
	ml         *memberlist.Memberlist
	del        *delegate
	view       *view
	gossipAddr string // advertised "ip:port", fixed at New
	// warnedSelfSeed is set once a join attempt has logged a seed that names this member at
	// another port (see selfseed.go).
	warnedSelfSeed atomic.Bool
	// refusals are the seeds that turned a join away, and why (refusal.go).
	refusals refusals
	// retransmitMult is memberlist's RetransmitMult: how many times it sends a broadcast
	// scales with it (see broadcastWait).
	retransmitMult int
	// keyring is memberlist's, nil for plaintext gossip; it locks itself. keysMu serializes
	// SetKeys, whose add, use and remove must not interleave with another's.
	keyring *memberlist.Keyring
	keysMu  sync.Mutex

	// ctx is cancelled by Close; it stops the owned goroutines and the join attempts.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the owned goroutines: the view's delivery, the join loop and join workers.
	wg sync.WaitGroup

	// opMu is held for reading around the memberlist calls that must not start after Shutdown
	// (memberlist's Leave panics then), and for writing by Close around Shutdown. So Close waits
	// for a Leave or UpdateMeta in flight, at most until that call's deadline.
	opMu sync.RWMutex

	lifeMu sync.Mutex
	// guards closed, left, and wg.Add once closed may be set (so Close's wg.Wait sees every Add)
	closed bool
	left   bool
}

// New validates cfg, starts gossip on the configured address, and joins cfg.Seeds.
//
// With seeds, New makes one join attempt, bounded by JoinTimeout. Its failure is not an error
// (it is logged): the first member of a cluster starts before the others, and a background loop
// retries with backoff until some seed is reached, then re-joins, every RejoinInterval, the seeds
// that are not members. Without seeds, this member is a one-node cluster that others may join.
// One finding of that attempt fails New: a "dns+" or "k8s://" seed that names this member's own
// address at another port than the one it is reached at (see selfseed.go).
func New(cfg Config) (*Membership, error) {
	s, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	log := s.Logger
	keyring, err := newKeyring(s)
	if err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}

	tr, bound, err := openTransport(s, newMemberlistLogger(log))
	if err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}
	advertisePort := s.AdvertisePort
	if advertisePort == 0 {
		advertisePort = bound
	}
	// memberlist.Create would fail on this too, but without shutting the transport down.
	if _, _, err := tr.FinalAdvertiseAddr(s.AdvertiseAddr, advertisePort); err != nil {
		tr.Shutdown()
		return nil, fmt.Errorf("peer: advertise address: %w", err)
	}

	// Publish the meta as peers will decode it, so Self and Members agree.
	self, err := decodeMeta(wireMeta{Meta: s.Meta}.encode())
	if err != nil {
		tr.Shutdown()
		return nil, fmt.Errorf("peer: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	m := &Membership{
		s:       s,
		log:     log,
		keyring: keyring,
		view:    newView(s.Name, s.OnChange, s.OnEvent, log),
		ctx:     ctx,
		cancel:  cancel,
	}
	if s.ReconnectInterval > 0 {
		m.view.failed = make(map[string]failure) // before memberlist reports any failure
	}
	m.del = newDelegate(s.Name, self.Meta, log, m.view)
	m.del.localState, m.del.mergeState = s.LocalState, s.MergeState
	m.del.claimTTL = claimantTTL(s)

	mc := memberlist.DefaultLANConfig()
	mc.Name = s.Name
	mc.Transport = tr
	mc.BindAddr = s.BindAddr
	mc.BindPort = bound
	mc.AdvertiseAddr = s.AdvertiseAddr
	mc.AdvertisePort = advertisePort
	mc.Label = s.Label
	mc.EnableCompression = !s.NoCompression
	mc.Keyring = keyring
	mc.GossipVerifyIncoming = !s.AcceptPlaintext
	mc.GossipVerifyOutgoing = !s.SendPlaintext
	mc.ProbeInterval = s.ProbeInterval
	mc.ProbeTimeout = s.ProbeTimeout
	mc.GossipInterval = s.GossipInterval
	mc.PushPullInterval = s.PushPullInterval
	mc.SuspicionMult = s.SuspicionMult
	mc.DeadNodeReclaimTime = s.DeadNodeReclaimTime
	mc.TCPTimeout = s.StreamTimeout
	// A dead member is gossiped to (so it may refute) as long as a full exchange would reach it.
	mc.GossipToTheDeadTime = s.PushPullInterval
	mc.Logger = newMemberlistLogger(log)
	mc.Delegate = m.del
	mc.Events = m.del
	mc.Alive = m.del
	mc.Merge = m.del
	mc.Conflict = m.del

	ml, err := memberlist.Create(mc)
	if err != nil {
		cancel()
		tr.Shutdown() // Create does not, when it fails before starting
		return nil, fmt.Errorf("peer: start memberlist: %w", err)
	}
	m.ml = ml
	m.gossipAddr = ml.LocalNode().Address()
	m.retransmitMult = mc.RetransmitMult
	if s.ReconnectInterval > 0 {
		// Its own source, drawn before the join loop takes s.Rand over.
		r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		if s.Rand != nil {
			r = rand.New(rand.NewPCG(s.Rand.Uint64(), s.Rand.Uint64()))
		}
		m.wg.Go(func() { m.reconnectLoop(r) })
	}

	if s.OnChange != nil || s.OnEvent != nil {
		m.wg.Go(func() { m.view.run(ctx) })
	}
	log.Info("gossip started", "member", s.Name, "gossip_addr", m.gossipAddr, "peer_addr", self.PeerAddr)

	if len(s.seeds) > 0 {
		jctx, jcancel := context.WithTimeout(ctx, s.JoinTimeout)
		n, err := m.joinSeeds(jctx, false, true)
		jcancel()
		if sse := (*selfSeedError)(nil); errors.As(err, &sse) {
			m.Close()
			return nil, err
		}
		if n > 0 {
			log.Info("joined cluster", "member", s.Name, "seeds_reached", n, "members", m.view.len())
		} else {
			log.Warn("no seed reached yet; retrying in the background", "member", s.Name, "seeds", s.Seeds, "err", err)
		}
		m.wg.Go(func() { m.joinLoop(n > 0) })
	}
	return m, nil
}

// Self returns this member as peers see it.
func (m *Membership) Self() Member {
	w := m.del.currentMeta()
	return Member{Name: m.s.Name, GossipAddr: m.gossipAddr, Meta: w.Meta, Leaving: w.leaving}
}

// GossipAddr returns the "ip:port" this member advertises for gossip, usable as another
// member's seed. With BindPort 0 it tells the port that was picked.
func (m *Membership) GossipAddr() string { return m.gossipAddr }

// Members returns the live members (alive or suspected, not left or dead) sorted by Name. This
// member is always included, even after Leave: it keeps serving until Close.
func (m *Membership) Members() []Member { return m.view.list() }

// NumMembers returns how many members are live, this one included: the length of Members,
// without making the list.
func (m *Membership) NumMembers() int { return m.view.len() }

// Claimants returns the members that claimed, within the last few DeadNodeReclaimTimes, the
// name of a member that is not live here from a new address: members back at a new address
// that memberlist does not admit yet (see claimants.go). They are not in Members.
func (m *Membership) Claimants() []Member {
	cs := m.del.claims.list(time.Now())
	// A name live here is not a claimant: its known life is still live (two processes claim
	// one name, or this member has not found the old one dead yet), or it was admitted.
	return slices.DeleteFunc(cs, func(c Member) bool { return m.view.has(c.Name) })
}

// UpdateMeta publishes new meta and waits until it has been gossiped, at most a few gossip
// rounds (see broadcast.go) and never past ctx's deadline (10s without one). meta.RingVersion must be 0 or this member's ring version, and
// meta.StartedAt zero keeps the current one. Peers get EventUpdate.
func (m *Membership) UpdateMeta(ctx context.Context, meta Meta) error {
	cur := m.del.currentMeta()
	if meta.RingVersion == 0 {
		meta.RingVersion = cur.RingVersion
	}
	if meta.RingVersion != cur.RingVersion {
		return fmt.Errorf("peer: UpdateMeta: ring version %d cannot change to %d while running", cur.RingVersion, meta.RingVersion)
	}
	if meta.StartedAt.IsZero() {
		meta.StartedAt = cur.StartedAt
	}
	if err := meta.validate(); err != nil {
		return err
	}
	w, err := decodeMeta(wireMeta{Meta: meta}.encode())
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	m.opMu.RLock()
	defer m.opMu.RUnlock()
	// Checked and set under lifeMu, so that a concurrent Leave's leaving flag is never
	// overwritten.
	m.lifeMu.Lock()
	err = m.checkLiveLocked()
	if err == nil {
		w.leaving = m.del.currentMeta().leaving
		m.del.setMeta(w)
	}
	m.lifeMu.Unlock()
	if err != nil {
		return err
	}
	if err := m.awaitBroadcast(ctx, m.ml.UpdateNode); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("peer: UpdateMeta: %w", err)
	}
	return nil
}

// StartLeaving tells the cluster that this member is about to leave: it publishes meta marked
// "leaving" and waits until it has been gossiped, as UpdateMeta does. Peers then see
// Member.Leaving set — this member is still live and serving, but hands its keys off and takes
// no more — and, when it leaves, report EventLeave rather than EventFail. Leave, which should follow, does not publish it again. Calling StartLeaving again
// returns nil; after Leave it returns ErrLeft, after Close ErrClosed.
func (m *Membership) StartLeaving(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.opMu.RLock()
	defer m.opMu.RUnlock()
	m.lifeMu.Lock()
	err := m.checkLiveLocked()
	already := err == nil && m.del.currentMeta().leaving
	if err == nil && !already {
		w := m.del.currentMeta()
		w.leaving = true
		m.del.setMeta(w)
	}
	m.lifeMu.Unlock()
	if err != nil || already {
		return err
	}
	if err := m.awaitBroadcast(ctx, m.ml.UpdateNode); err != nil {
		return fmt.Errorf("peer: StartLeaving: %w", err)
	}
	return nil
}

// Leave tells the cluster that this member is going away, so that peers report EventLeave (not
// EventFail) and drop it at once rather than after failure detection. It keeps gossiping until
// Close, which should follow. Leave first publishes meta marked "leaving" and waits for it to be
// gossiped (unless StartLeaving did), then broadcasts memberlist's leave and waits for that:
// each wait takes at most a few gossip rounds (see broadcast.go) and ends at ctx's deadline
// (10s without one). A peer that missed the first message reports EventFail instead. When a
// wait is cut short while other members are live, Leave returns an error but the leave is under
// way all the same: memberlist keeps gossiping it until Close. When no other member is live any
// more (they all left at once), there is nobody left to tell, and Leave returns nil.
//
// After Leave, this member still lists itself in Members (it keeps serving until Close) and gets
// no event about itself. Calling Leave again returns nil; after Close it returns ErrClosed.
func (m *Membership) Leave(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.opMu.RLock()
	defer m.opMu.RUnlock()
	m.lifeMu.Lock()
	closed, left := m.closed, m.left
	announced := m.del.currentMeta().leaving
	if !closed && !left {
		m.left = true
		w := m.del.currentMeta()
		w.leaving = true
		m.del.setMeta(w)
	}
	m.lifeMu.Unlock()
	if closed {
		return ErrClosed
	}
	if left {
		return nil
	}

	var errs []error
	if !announced {
		if err := m.awaitBroadcast(ctx, m.ml.UpdateNode); err != nil {
			// Go on: leaving matters more than peers knowing it was graceful.
			errs = append(errs, fmt.Errorf("announce leaving: %w", err))
		}
	}
	if err := m.awaitBroadcast(ctx, m.ml.Leave); err != nil {
		errs = append(errs, fmt.Errorf("broadcast leave: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("peer: Leave: %w", err)
	}
	m.log.Info("left cluster", "member", m.s.Name)
	return nil
}

// Close stops gossip and every goroutine of this Membership, without leaving: peers detect the
// silence and report EventFail, as for a crash (call Leave first to avoid that). It waits for a
// Leave or UpdateMeta in flight to end, and for a reconnect's ping in flight (at most
// ProbeTimeout). After Close returns, no callback runs. Close is
// idempotent and safe after Leave; it must not be called from OnChange or OnEvent.
func (m *Membership) Close() error {
	m.lifeMu.Lock()
	if m.closed {
		m.lifeMu.Unlock()
		return nil
	}
	m.closed = true
	m.lifeMu.Unlock()

	m.cancel()
	m.opMu.Lock()
	err := m.ml.Shutdown()
	m.opMu.Unlock()
	m.wg.Wait()
	if err != nil {
		return fmt.Errorf("peer: shutdown: %w", err)
	}
	return nil
}

// checkLiveLocked returns ErrClosed or ErrLeft when the membership is no longer usable.
// m.lifeMu must be held.
func (m *Membership) checkLiveLocked() error {
	switch {
	case m.closed:
		return ErrClosed
	case m.left:
		return ErrLeft
	}
	return nil
}

// waitBudget converts ctx's deadline into the timeout memberlist takes. memberlist reads a zero
// timeout as "wait forever", so the budget is never below a nanosecond.
func waitBudget(ctx context.Context) time.Duration {
	d := maxWait
	if dl, ok := ctx.Deadline(); ok {
		d = min(time.Until(dl), maxWait)
	}
	return max(d, time.Nanosecond)
}

// String returns e.g. "peer.Membership(node-a@10.0.0.7:7946)".
func (m *Membership) String() string {
	return "peer.Membership(" + m.s.Name + "@" + m.gossipAddr + ")"
}
