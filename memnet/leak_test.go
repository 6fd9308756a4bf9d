package memnet_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/corralcache/corral/memnet"
)

// TestTransportShutdownEndsItsGoroutine checks that a Transport's goroutine is gone once
// Shutdown has returned, with no virtual time passing, and that its connections are closed.
func TestTransportShutdownEndsItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before, _ := bubbleGoroutines()
		n, _ := memnet.New(memnet.Config{})
		a, err := n.NewHost().NewTransport(7946)
		if err != nil {
			t.Fatal(err)
		}
		b, err := n.NewHost().NewTransport(7946)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.DialTimeout(b.Addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		accepted := <-b.StreamCh()
		a.WriteTo([]byte("queued"), b.Addr()) // waits in b's pump when Shutdown comes
		synctest.Wait()
		a.Shutdown()
		b.Shutdown()
		b.Shutdown() // safe twice
		// The pump closes pumped in a deferred call, so it may still be on its way out when
		// Shutdown returns; Wait lets it finish without advancing virtual time.
		synctest.Wait()
		if k, stacks := bubbleGoroutines(); k != before {
			t.Errorf("%d goroutines left after Shutdown, want %d:\n%s", k, before, stacks)
		}
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a dialled connection is open after Shutdown")
		}
		if _, err := accepted.Read(make([]byte, 1)); err == nil {
			t.Error("an accepted connection is open after Shutdown")
		}
	})
}

// TestNoGoroutineOutlivesShutdown runs a 5-node memberlist cluster with a gRPC server on every
// node and a client from every node to every other, shuts everything down, and checks that
// every goroutine ends: memnet's at once, memberlist's and grpc-go's within a few virtual
// seconds (memberlist's probe waits for its ack timer), then goleak finds nothing.
func TestNoGoroutineOutlivesShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		before, _ := bubbleGoroutines()
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		c := newCluster(t, n, 5)
		c.waitViews(convergeLimit, allSee(c.nodes...))
		var stops []func()
		for _, m := range c.nodes {
			stops = append(stops, serveEcho(t, m.h))
		}
		var clients []*grpc.ClientConn
		for _, from := range c.nodes {
			for _, to := range c.nodes {
				if from != to {
					cc := dialEcho(t, from.h, to.h.Addr(port))
					clients = append(clients, cc)
					if _, err := echo(t.Context(), cc, "hi"); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		during, _ := bubbleGoroutines()

		for _, cc := range clients {
			cc.Close()
		}
		for _, stop := range stops {
			stop()
		}
		for _, m := range c.nodes {
			m.ml.Shutdown()
		}
		synctest.Wait()
		left, stacks := bubbleGoroutines()
		if strings.Contains(stacks, "memnet.(*") {
			t.Errorf("memnet goroutines left after Shutdown:\n%s", stacks)
		}
		took := settle(t, before)
		t.Logf("goroutines: %d before, %d running, %d right after shutdown (%s), all gone %v (virtual) later",
			before, during, left-before, topFrames(stacks), took)
		goleak.VerifyNone(t, ignore)
	})
}

// topFrames summarises goroutine stacks by the function each is blocked in.
func topFrames(stacks string) string {
	count := map[string]int{}
	var order []string
	for _, g := range strings.Split(stacks, "\n\n") {
		lines := strings.Split(g, "\n")
		if len(lines) < 2 || strings.Contains(g, "memnet_test.") || strings.Contains(g, "testing/synctest") ||
			strings.Contains(g, "internal/synctest") {
			continue
		}
		f, _, _ := strings.Cut(lines[1], "(")
		if count[f] == 0 {
			order = append(order, f)
		}
		count[f]++
	}
	var s []string
	for _, f := range order {
		s = append(s, fmt.Sprintf("%d× %s", count[f], f))
	}
	return strings.Join(s, ", ")
}
