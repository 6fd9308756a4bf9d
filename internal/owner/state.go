package owner

import "sync/atomic"

// State is a node's lifecycle as the owner's side and the node's groups read it. The node
// sets it as it closes, in this order: Leaving, then Writes shut and Draining, then Left,
// then Closed. The zero value is a node that serves.
type State struct {
	Leaving  atomic.Bool // Close began: not ready, new writes fail, no hand-off is taken
	Draining atomic.Bool // handed off: peers get warm pulls only, and the node's own Gets go to other members (view.View.Stopped)
	Left     atomic.Bool // left the gossip cluster: its view is no longer kept up
	Closed   atomic.Bool // Close returned, or the node was killed: every call returns view.ErrClosed
	Writes   WriteGate   // shut when the node stops serving: no write is applied here as owner after it
}
