package memnet

import (
	"fmt"
	"time"
)

// EventKind names what happened in an Event.
type EventKind string

// The kinds of Event. Faults are traced as they are applied; traffic as it happens.
const (
	EventHostUp      EventKind = "host-up"      // a host was added (From: its IP)
	EventPause       EventKind = "pause"        // From was paused
	EventResume      EventKind = "resume"       // From resumed
	EventCrash       EventKind = "crash"        // From crashed
	EventRestart     EventKind = "restart"      // From restarted
	EventFault       EventKind = "fault"        // a cut, partition, heal or link change (Detail says which)
	EventListen      EventKind = "listen"       // a Listener or Transport bound From
	EventUnlisten    EventKind = "unlisten"     // it closed
	EventSend        EventKind = "send"         // a packet From → To left, Size bytes
	EventDeliver     EventKind = "deliver"      // a packet From → To was handed to the receiver
	EventDrop        EventKind = "drop"         // a packet From → To was lost (Detail says why)
	EventDial        EventKind = "dial"         // host From started a dial to To
	EventConnect     EventKind = "connect"      // the dial from From to To connected
	EventRefuse      EventKind = "refuse"       // the dial to To was refused
	EventDialTimeout EventKind = "dial-timeout" // the dial to To ended at its deadline or ctx
	EventAccept      EventKind = "accept"       // the connection From → To was accepted
	EventClose       EventKind = "close"        // the end From of a connection to To closed
	EventReset       EventKind = "reset"        // the end From was aborted: To will be reset
)

// Event is one thing that happened on a Network, for Config.Trace.
type Event struct {
	Time   time.Time // the clock of the goroutine that made it happen (virtual in a bubble)
	Kind   EventKind
	From   string // an address ("ip:port"), a host's IP, or hosts separated by spaces
	To     string // the other end, when there is one
	Size   int    // bytes, for packets
	Detail string // why a packet was dropped, what a fault was
}

// String formats e on one line, its time as the time of day (which, in a bubble, is the time
// since the bubble started), e.g. "00:00:01.250000 send 10.0.0.1:7946 > 10.0.0.2:7946 63B".
func (e Event) String() string {
	s := e.Time.UTC().Format("15:04:05.000000") + " " + string(e.Kind)
	if e.From != "" {
		s += " " + e.From
	}
	if e.To != "" {
		s += " > " + e.To
	}
	if e.Size > 0 {
		s += fmt.Sprintf(" %dB", e.Size)
	}
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}
