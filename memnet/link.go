package memnet

import (
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"
)

// Link is how one direction between two hosts behaves.
type Link struct {
	// Delay is the one-way latency of a packet or a stream segment. 0 = delivered at once.
	Delay time.Duration

	// Jitter adds to each packet's and segment's delay a duration uniform in [0, Jitter).
	// Packets may then overtake each other; stream bytes never do (a segment is never delivered
	// before one written earlier). 0 = none.
	Jitter time.Duration

	// Loss is the probability, in [0, 1], that a packet is dropped. A stream loses nothing: a
	// lost segment arrives one retransmission timeout (200 ms) late, and a lost SYN or SYN-ACK
	// delays a dial by 1 s, 2 s, 4 s, … as the kernel's retransmissions do. 0 = none.
	Loss float64
}

func (l Link) validate() error {
	switch {
	case l.Delay < 0:
		return errors.New("negative Delay")
	case l.Jitter < 0:
		return errors.New("negative Jitter")
	case !(l.Loss >= 0 && l.Loss <= 1): // also refuses NaN
		return errors.New("Loss outside [0, 1]")
	}
	return nil
}

// SetLink makes the direction from→to behave as l, from now on: packets and segments already
// in flight keep the delay they were sent with. It returns an error for an invalid l.
func (n *Network) SetLink(from, to *Host, l Link) error {
	if err := l.validate(); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links[pair{from, to}] = l
	n.traceLocked(Event{Kind: EventFault, From: from.ip.String(), To: to.ip.String(),
		Detail: "link " + l.String()})
	return nil
}

// ClearLink undoes SetLink: from→to behaves as Config.Link again.
func (n *Network) ClearLink(from, to *Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.links, pair{from, to})
	n.traceLocked(Event{Kind: EventFault, From: from.ip.String(), To: to.ip.String(), Detail: "link default"})
}

func (l Link) String() string {
	return "delay=" + l.Delay.String() + " jitter=" + l.Jitter.String() + " loss=" + strconv.FormatFloat(l.Loss, 'g', -1, 64)
}

// Cut stops everything from each host of from to each host of to, one way: packets from→to
// are lost, and (since TCP needs both directions) streams between them stall and dials between
// them hang. Heal undoes it.
func (n *Network) Cut(from, to []*Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range from {
		for _, b := range to {
			if a != b {
				n.cuts[pair{a, b}] = true
			}
		}
	}
	n.traceLocked(Event{Kind: EventFault, From: ips(from), To: ips(to), Detail: "cut"})
	n.changedLocked()
}

// Uncut undoes Cut(from, to), leaving other cuts as they are: Uncut(a, b) and Uncut(b, a)
// together undo Partition(a, b).
func (n *Network) Uncut(from, to []*Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range from {
		for _, b := range to {
			delete(n.cuts, pair{a, b})
		}
	}
	n.traceLocked(Event{Kind: EventFault, From: ips(from), To: ips(to), Detail: "uncut"})
	n.changedLocked()
}

// Partition cuts both ways between every two sides: each host then reaches only the hosts of
// its own side (and those listed on no side, which it reached before). Heal undoes it.
func (n *Network) Partition(sides ...[]*Host) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, s := range sides {
		for j, t := range sides {
			if i == j {
				continue
			}
			for _, a := range s {
				for _, b := range t {
					if a != b {
						n.cuts[pair{a, b}] = true
					}
				}
			}
		}
	}
	detail := "partition"
	for _, s := range sides {
		detail += " [" + ips(s) + "]"
	}
	n.traceLocked(Event{Kind: EventFault, Detail: detail})
	n.changedLocked()
}

// Heal removes every cut made by Cut and Partition. Stalled streams flow again at once (their
// bytes arrive no earlier than they would have without the cut); packets lost stay lost. Delays
// and losses set by SetLink stay.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cuts)
	n.traceLocked(Event{Kind: EventFault, Detail: "heal"})
	n.changedLocked()
}

// linkLocked returns how from→to behaves now. A host's link to itself is loopback: no delay,
// no loss, never cut.
func (n *Network) linkLocked(from, to *Host) Link {
	if from == to {
		return Link{}
	}
	if l, ok := n.links[pair{from, to}]; ok {
		return l
	}
	return n.cfg.Link
}

// packetPassesLocked reports whether a packet may travel from→to now: the direction is not cut
// and the sender is not paused. (A paused receiver keeps packets queued until it resumes.)
func (n *Network) packetPassesLocked(from, to *Host) bool {
	return !n.cuts[pair{from, to}] && !from.paused
}

// flowsLocked reports whether stream bytes move between a and b now: TCP needs both
// directions (data one way, acknowledgements the other), and neither end may be paused.
func (n *Network) flowsLocked(a, b *Host) bool {
	return !n.cuts[pair{a, b}] && !n.cuts[pair{b, a}] && !a.paused && !b.paused
}

// handshakeFlowsLocked reports whether a dial from a to b can complete now: both directions
// uncut and the dialer running. A paused b still completes it: its kernel answers the SYN, and
// the connection waits in the accept queue until b resumes.
func (n *Network) handshakeFlowsLocked(a, b *Host) bool {
	return !n.cuts[pair{a, b}] && !n.cuts[pair{b, a}] && !a.paused
}

// randLocked returns from→to's generator. It is seeded from the network's seed and the two
// addresses alone, so that what it draws depends only on the traffic of this link.
func (n *Network) randLocked(from, to *Host) *rand.Rand {
	p := pair{from, to}
	if r := n.rands[p]; r != nil {
		return r
	}
	h := fnv.New64a()
	h.Write(from.ip.AsSlice())
	h.Write([]byte{'>'})
	h.Write(to.ip.AsSlice())
	r := rand.New(rand.NewPCG(n.seed, h.Sum64()))
	n.rands[p] = r
	return r
}

// delayLocked draws one delay for a packet or segment from→to.
func (n *Network) delayLocked(from, to *Host, l Link) time.Duration {
	d := l.Delay
	if l.Jitter > 0 {
		d += time.Duration(n.randLocked(from, to).Int64N(int64(l.Jitter)))
	}
	return d
}

// lostLocked draws whether one packet or segment from→to is lost.
func (n *Network) lostLocked(from, to *Host, l Link) bool {
	return l.Loss > 0 && n.randLocked(from, to).Float64() < l.Loss
}

func ips(hs []*Host) string {
	s := ""
	for i, h := range hs {
		if i > 0 {
			s += " "
		}
		s += h.ip.String()
	}
	return s
}
