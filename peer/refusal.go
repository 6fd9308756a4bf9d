package peer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What a joiner can tell of a refusal. A seed with another label or another gossip key says
// why in its own log only; the joiner sees how its TCP state exchange ended, and memberlist
// reports that as text (it wraps with %v, so nothing can be unwrapped). Measured against
// memberlist v0.7.0 (TestJoinRefusalSaysWhy):
//
//   - Another label, or a label on one side only: the seed reads the stream's label header,
//     finds it is not its own and closes the connection without a byte of answer. The joiner
//     reads EOF (or a reset, when the close finds unread bytes). Other things close a stream
//     unanswered too — a seed with 128 exchanges in flight, a process that is not a member —
//     so this reading is a guess, and says "likely".
//   - Another key: the seed cannot decrypt the joiner's state and answers with an error
//     encrypted under its own key, which the joiner cannot decrypt: "no installed keys could
//     decrypt the message".
//   - A key on one side only: one side reads a plaintext message where it requires an
//     encrypted one, or the reverse. When the joiner finds it, its own words; when the seed
//     does and the joiner can read the seed's error (it accepts plaintext), "remote error: …".

// The reasons of a JoinRefusedError.
const (
	// RefusedLabel: the seed closed the connection without answering, which is what a member
	// does with a stream of another cluster label. Likely, not certain (see Diagnosis).
	RefusedLabel = "label"
	// RefusedKey: the seed answered with a message encrypted under a gossip key this member
	// does not hold.
	RefusedKey = "key"
	// RefusedEncryption: one of the two encrypts gossip and the other does not.
	RefusedEncryption = "encryption"
)

// RefusedReasons are the reasons a JoinRefusedError may give, in a fixed order.
var RefusedReasons = []string{RefusedLabel, RefusedKey, RefusedEncryption}

// JoinRefusedError is a join that reached a seed — the TCP connection was made — and was
// turned away, with this member's reading of why. Join, and the error New logs when its
// first attempt fails, return it for such a seed; JoinRefusals lists the seeds that refused
// the attempts of the background loop too.
//
//	var re *peer.JoinRefusedError
//	if errors.As(err, &re) && re.Reason == peer.RefusedLabel { … }
type JoinRefusedError struct {
	Seed   string // the address joined, "ip:port"
	Reason string // one of RefusedReasons
	// Diagnosis is one sentence for an operator: what this member saw, what it suggests, and
	// "likely" where that is a guess.
	Diagnosis string
	Err       error     // what memberlist reported
	At        time.Time // when the seed refused
}

func (e *JoinRefusedError) Error() string {
	cause := strings.TrimPrefix(e.Err.Error(), "failed to join "+e.Seed+": ")
	return fmt.Sprintf("seed %s refused the join: %s (%s)", e.Seed, e.Diagnosis, cause)
}

func (e *JoinRefusedError) Unwrap() error { return e.Err }

// diagnose returns the refusal that err, memberlist's error of a join with seed, shows, or
// nil when it shows none: the seed could not be reached (refused, timed out, no route) or
// failed some other way. label is this member's cluster label.
func diagnose(seed string, err error, label string, now time.Time) *JoinRefusedError {
	msg := err.Error()
	remote := strings.Contains(msg, "remote error: ")
	var reason, why string
	switch {
	case strings.Contains(msg, "no installed keys could decrypt the message"):
		reason, why = RefusedKey, "another gossip key: the seed and this member encrypt gossip with keys the other does not hold"
	case strings.Contains(msg, "remote state is encrypted and encryption is not configured") && remote:
		reason, why = RefusedEncryption, "the seed has no gossip key: this member encrypts gossip and the seed reads only plaintext"
	case strings.Contains(msg, "remote state is encrypted and encryption is not configured"):
		reason, why = RefusedEncryption, "this member has no gossip key: the seed encrypts gossip"
	case strings.Contains(msg, "encryption is configured but remote state is not encrypted") && remote:
		reason, why = RefusedEncryption, "the seed accepts only encrypted gossip and this member sent plaintext"
	case strings.Contains(msg, "encryption is configured but remote state is not encrypted"):
		reason, why = RefusedEncryption, "the seed sent plaintext and this member accepts only encrypted gossip: the seed has no gossip key, or sends plaintext while encryption is turned on"
	case strings.HasSuffix(msg, ": EOF") || strings.Contains(msg, "connection reset by peer"):
		own := fmt.Sprintf("this member's is %q", label)
		if label == "" {
			own = "this member has none"
		}
		reason, why = RefusedLabel, "likely another cluster label ("+own+"): the seed closed the connection without answering, "+
			"as a member does with a stream whose label is not its own; an overloaded seed, or a process that is not a member, does so too"
	default:
		return nil
	}
	return &JoinRefusedError{Seed: seed, Reason: reason, Diagnosis: why, Err: err, At: now}
}

// maxRefusals bounds the seeds whose refusal is remembered: a Service of a few hundred pods
// with another label is shown well enough by its first 64.
const maxRefusals = 64

// refusals remembers the last refusal of each seed address, and counts every refusal by
// reason.
type refusals struct {
	counts [3]atomic.Uint64 // by index in RefusedReasons, which has 3

	mu sync.Mutex // guards last
	// last holds the latest refusal of each seed address that has not been joined since.
	last map[string]*JoinRefusedError
}

// record remembers e and counts it. It reports whether the seed's last attempt was not
// refused for the same reason: a refusal worth a Warn, the ones after it Debug.
func (r *refusals) record(e *JoinRefusedError) bool {
	r.counts[slices.Index(RefusedReasons, e.Reason)].Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.last[e.Seed]
	if !ok && len(r.last) >= maxRefusals {
		return false // past the bound: counted, not remembered
	}
	if r.last == nil {
		r.last = make(map[string]*JoinRefusedError)
	}
	r.last[e.Seed] = e
	return !ok || prev.Reason != e.Reason
}

// joined forgets the refusal of seed, which let this member join.
func (r *refusals) joined(seed string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, seed)
}

// standing returns the refusals made since since, sorted by seed, and forgets older ones: a
// seed that is no longer asked (it left the Service's records) stops being shown.
func (r *refusals) standing(since time.Time) []*JoinRefusedError {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*JoinRefusedError
	for seed, e := range r.last {
		if e.At.Before(since) {
			delete(r.last, seed)
			continue
		}
		c := *e // the caller's to keep: a later refusal replaces the entry, never changes it
		out = append(out, &c)
	}
	slices.SortFunc(out, func(a, b *JoinRefusedError) int { return strings.Compare(a.Seed, b.Seed) })
	return out
}

// JoinRefusals returns the seed addresses whose last join attempt was refused, sorted by
// address: a seed with another label or gossip key, which this member keeps trying and which
// never lets it in. A seed drops out once it is joined, once it is a member, and once no
// attempt has been refused by it for two rounds of the join loop (it is no longer among the
// seeds' addresses, or the loop has stopped). Each is the caller's to keep.
func (m *Membership) JoinRefusals() []*JoinRefusedError {
	// The loop asks every seed address at least every round: JoinBackoffMax while no seed has
	// been reached, RejoinInterval after.
	round := max(m.s.JoinBackoffMax, m.s.RejoinInterval) + m.s.JoinTimeout
	rs := m.refusals.standing(time.Now().Add(-2 * round))
	members := make(map[string]bool)
	for _, mem := range m.view.list() {
		members[mem.GossipAddr] = true
	}
	return slices.DeleteFunc(rs, func(e *JoinRefusedError) bool { return members[e.Seed] })
}

// JoinRefusedCount returns how many join attempts a seed refused for reason (one of
// RefusedReasons) since New: each address of an attempt counts once.
func (m *Membership) JoinRefusedCount(reason string) uint64 {
	i := slices.Index(RefusedReasons, reason)
	if i < 0 {
		return 0
	}
	return m.refusals.counts[i].Load()
}

// joinResult reads the end of a join with addr: a refusal is recorded and logged, and
// returned as a *JoinRefusedError; a success forgets addr's refusal.
func (m *Membership) joinResult(addr string, err error) error {
	if err == nil {
		m.refusals.joined(addr)
		return nil
	}
	re := diagnose(addr, err, m.s.Label, time.Now())
	if re == nil {
		return err
	}
	level := m.log.Debug
	if m.refusals.record(re) {
		level = m.log.Warn
	}
	level("seed refused this member's join", "member", m.s.Name, "seed", addr, "reason", re.Reason,
		"diagnosis", re.Diagnosis, "err", strings.TrimPrefix(err.Error(), "failed to join "+addr+": "))
	return re
}

var _ error = (*JoinRefusedError)(nil)
