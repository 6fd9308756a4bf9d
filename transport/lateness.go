package transport

import (
	"sync"
	"sync/atomic"
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
// A peer's lateness counts too. Starvation is often a container's alone — its CPU quota spent,
// it stands still for the rest of each quota period — and then the node waiting on it runs on
// time while the peer, live, leaves a question unanswered for most of a period. So a node
// tells its lateness in every answer it sends on a Get stream (GetReply.late_millis, from
// 10 ms), each caller keeps what each peer told last (toldLateness), and the bound for a peer
// is SilentPeerTimeout plus twice the larger of the two (silence.boundFor). A node tells the
// largest lateness of a longer window than it counts itself, 15 to 30 s (toldPeriod): a quota
// throttles a container only in the periods it spends its quota in, and the first stall after
// a few quiet seconds is as long as the last — its askers must still know of it. What a peer
// tells counts up to maxPeerLate, so that a peer cannot put off its own fail-over for long by
// what it says; a paused peer says nothing more, and is failed over within the bound its last
// word earned, or SilentPeerTimeout once that word is latePeriod old.
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
	// minToldLate is the least lateness a node tells its callers: less changes no bound
	// much, and a node on time sends nothing more in its answers.
	minToldLate = 10 * time.Millisecond
	// maxPeerLate is the most of what a peer told that counts in a bound.
	maxPeerLate = latePeriod
	// toldPeriod is how long a lateness seen is told to callers: between one and two periods.
	toldPeriod = 15 * time.Second
)

// maxWindow is the largest duration added in the last one to two periods of a given length.
type maxWindow struct {
	cur, prev time.Duration
	from      time.Time // when the period of cur began
}

// roll moves to the period now is in: cur becomes prev, or both are forgotten when more than
// a period passed since.
func (w *maxWindow) roll(now time.Time, period time.Duration) {
	switch since := now.Sub(w.from); {
	case since < period:
	case since < 2*period:
		w.prev, w.cur, w.from = w.cur, 0, w.from.Add(period)
	default:
		w.prev, w.cur, w.from = 0, 0, now
	}
}

// largest returns the largest duration of the window, as of its last roll.
func (w *maxWindow) largest() time.Duration { return max(w.cur, w.prev) }

// lateness measures how late this process runs its timers: the largest delay seen over the
// last one to two latePeriods (and, what it tells, toldPeriods), by a timer of its own (every
// lateTick from start to stop) and by the timers that judge silence (observe): each look of a
// stream's silence watch, and UntilSilent's waits. The zero value is a meter that has seen nothing and is not started.
type lateness struct {
	mu sync.Mutex
	// guards everything below
	timer   *time.Timer // the meter's own, from start to stop
	due     time.Time   // when timer is due
	stopped bool        // stop was called: start does nothing any more
	short   maxWindow   // of latePeriods: recent()'s
	long    maxWindow   // of toldPeriods: told's

	// told is the largest lateness of the last one to two toldPeriods, as of the last tick or
	// observation, in whole milliseconds, when at least minToldLate (else 0): what the node's
	// answers tell, read without mu.
	told atomic.Uint32
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
	l.told.Store(0) // stopped, it no longer knows
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
	l.publishLocked()
	l.due = now.Add(lateTick)
	l.timer.Reset(lateTick)
}

// observe records that a timer due at due fired at now.
func (l *lateness) observe(now, due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.observeLocked(now, now.Sub(due))
	if !l.stopped {
		l.publishLocked()
	}
}

// publishLocked sets told from the lateness recent now.
func (l *lateness) publishLocked() {
	var ms uint32
	if d := l.long.largest(); d >= minToldLate {
		ms = uint32(min(d, time.Hour) / time.Millisecond)
	}
	l.told.Store(ms)
}

// toldMillis returns the lateness the meter's node tells in its answers: in milliseconds, 0
// when under minToldLate or not measured. It takes no lock.
func (l *lateness) toldMillis() uint32 { return l.told.Load() }

// toldLateness is what a peer told of its lateness in its last answer that told any: its own
// recent lateness already, so the latest word is the one that counts, and an answer that
// tells nothing (the peer runs on time again) forgets it at once. With no answer at all — the
// peer paused or cut off — it counts for latePeriod after it came. Lock-free: the reader of
// a stream calls heard for every answer.
type toldLateness struct {
	ms atomic.Uint32 // the lateness told, in milliseconds; 0: none
	at atomic.Int64  // when it came, in Unix nanoseconds
}

// heard records the lateness told by an answer that came now (ms milliseconds, 0: none). An
// answer that tells nothing costs one atomic load.
func (t *toldLateness) heard(ms uint32) {
	if ms == 0 {
		if t.ms.Load() != 0 {
			t.ms.Store(0)
		}
		return
	}
	t.at.Store(time.Now().UnixNano())
	t.ms.Store(ms)
}

// recent returns the lateness the peer told lately, up to maxPeerLate.
func (t *toldLateness) recent() time.Duration {
	ms := t.ms.Load()
	if ms == 0 || time.Since(time.Unix(0, t.at.Load())) > latePeriod {
		return 0
	}
	return min(time.Duration(ms)*time.Millisecond, maxPeerLate)
}

func (l *lateness) observeLocked(now time.Time, late time.Duration) {
	l.rollLocked(now)
	l.short.cur = max(l.short.cur, late)
	l.long.cur = max(l.long.cur, late)
}

// recent returns the largest lateness seen in the last one to two latePeriods.
func (l *lateness) recent() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollLocked(time.Now())
	return l.short.largest()
}

// rollLocked moves both windows to the periods now is in.
func (l *lateness) rollLocked(now time.Time) {
	l.short.roll(now, latePeriod)
	l.long.roll(now, toldPeriod)
}
