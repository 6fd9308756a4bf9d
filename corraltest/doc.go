// Package corraltest runs a cluster of real corral nodes — real memberlist, real gRPC, the
// real fill engine — in one process, over an in-memory network (package memnet): no port is
// bound, and inside a testing/synctest bubble time is virtual, so failure detection, TTLs and
// drain windows take no wall-clock time. An application tests its own code against a
// five-node cluster with it, crashes and partitions included, the way net/http/httptest lets
// it test against a server.
//
// # Usage
//
//	func TestCheckout(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			c, err := corraltest.New(corraltest.Config{
//				Nodes: 5,
//				Setup: func(n *corral.Node) error {
//					_, err := corral.NewGroup(n, "prices", loadPrice, corral.WithTTL(time.Minute))
//					return err
//				},
//			})
//			if err != nil {
//				t.Fatal(err)
//			}
//			defer c.Close(context.Background())
//			if err := c.WaitConverged(ctx); err != nil { … }
//
//			c.Crash("n2")                           // no leave, no hand-off
//			c.Partition([]string{"n0"}, []string{"n1", "n3", "n4"})
//			time.Sleep(10 * time.Second)            // virtual: failure detection runs
//			c.Heal()
//			…
//		})
//	}
//
// The caller's duties:
//  1. Create the Cluster inside the bubble that uses it (a memnet network belongs to one
//     bubble), and Close it before the bubble's function returns: Close stops every node and
//     lets Linger pass, so that no goroutine is left (synctest reports one as a deadlock).
//  2. Register the application's groups in Config.Setup, so that a node started by Add or
//     Restart has them too.
//  3. Find a node's groups through the application's own bookkeeping (Setup sees each node
//     once per life).
//
// Nodes are named n0, n1, … in the order they were added; a restarted node keeps its name
// and address and comes back empty. Nodes take corral's production timings unless
// Config.Node changes them.
package corraltest
