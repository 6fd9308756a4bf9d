// Package crash lets corral's own tools — the demo, the in-memory test cluster, the
// simulator, the tests — stop a node as a crash would: no leave, no hand-off, peers find out
// through failure detection. The power stays off the public Node API, where production code
// would be tempted to use it; this package is internal, so only this module can.
package crash

// Node stops the node n (a *corral.Node) at once. Package corral sets it in its init; calling
// it with anything else panics.
var Node func(n any)
