package transport

import (
	"sync"
	"time"
)

// A node starved of CPU — a throttled container, a machine at load 20 — runs its goroutines
// late: a ping's answer waits in the socket until the reader gets a turn, and the timer that
// judges the ping fires late too. Judged by SilentPeerTimeout alone, its live peers look
// silent, and their keys are filled again on their successors. So the Client measures how
// late its own timers fire — local health, as memberlist's Lifeguard measures it — and every
// silence bound it applies is SilentPeerTimeout plus twice that lateness (silence.bound): a
// node that is itself late waits longer before it calls a peer silent. Twice, because an
// answer waits for a turn twice, the peer's to read the question and this node's to read the
// answer, and a peer on a starved machine is as late as this node.
//
// Not memberlist's awareness score, which Lifeguard raises for every probe that goes
// unanswered: a node cut off from its peers raises it too, and would then be slow to find
// them silent, the one thing it must do fast. A cut-off node's timers fire on time.

const (
	// lateTick is how often the meter's own timer fires: often enough that any stall of the
	// process longer than a tick is seen, rare enough to cost nothing (20 wake-ups a
	// second). A node's silence watches sample only while calls wait, and a stall that
	// began before is what makes a live peer look silent.
	lateTick = 50 * time.Millisecond
	// latePeriod is how long a lateness seen is remembered: between one and two periods. A
	// machine starved now is likely starved a moment later; after that, a node goes back
	// to the plain bound, and a silent peer is found as fast as before.
	latePeriod = 2 * time.Second
)

// lateness measures how late this process runs its timers: the largest delay seen over the
// last one to two latePeriods, by a timer of its own (every lateTick from start to stop) and
// by the timers that judge silence (observe): each look of a stream's silence watch, and
// UntilSilent's waits. The zero value is a meter that has seen nothing and is not started.
type lateness struct {
	mu sync.Mutex
	// guards everything below
	timer     *time.Timer // the meter's own, from start to stop
	due       time.Time   // when timer is due
	stopped   bool        // stop was called: start does nothing any more
	cur, prev time.Duration
	curFrom   time.Time // when the period of cur began
}

// start starts the meter's timer unless it runs or the meter was stopped. It makes no
// goroutine but the timer's own, which runs for a moment every lateTick.
func (l *lateness) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil || l.stopped {
		return
	}
	l.due = time.Now().Add(lateTick)
	l.timer = time.AfterFunc(lateTick, l.tick)
}

// stop stops the meter's timer for good; it is safe to call twice. A tick running as it
// stops sets no timer again.
func (l *lateness) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

func (l *lateness) tick() {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.observeLocked(now, now.Sub(l.due))
	l.due = now.Add(lateTick)
	l.timer.Reset(lateTick)
}

// observe records that a timer due at due fired at now.
func (l *lateness) observe(now, due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.observeLocked(now, now.Sub(due))
}

func (l *lateness) observeLocked(now time.Time, late time.Duration) {
	l.rollLocked(now)
	l.cur = max(l.cur, late)
}

// recent returns the largest lateness seen in the last one to two latePeriods.
func (l *lateness) recent() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollLocked(time.Now())
	return max(l.cur, l.prev)
}

// rollLocked moves to the period now is in: cur becomes prev, or both are forgotten when
// more than a period passed since.
func (l *lateness) rollLocked(now time.Time) {
	switch since := now.Sub(l.curFrom); {
	case since < latePeriod:
	case since < 2*latePeriod:
		l.prev, l.cur, l.curFrom = l.cur, 0, l.curFrom.Add(latePeriod)
	default:
		l.prev, l.cur, l.curFrom = 0, 0, now
	}
}
