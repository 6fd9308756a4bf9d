package memnet_test

import (
	"fmt"
	"io"
	"log"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/memnet"
)

// mlNode is one memberlist member on a host.
type mlNode struct {
	h  *memnet.Host
	tr *memnet.Transport
	ml *memberlist.Memberlist
}

func startMember(tb testing.TB, h *memnet.Host, name string, events memberlist.EventDelegate) *mlNode {
	tb.Helper()
	tr, err := h.NewTransport(7946)
	if err != nil {
		tb.Fatal(err)
	}
	c := memberlist.DefaultLANConfig()
	c.Name = name
	c.Transport = tr
	c.Logger = log.New(io.Discard, "", 0)
	c.Events = events
	ml, err := memberlist.Create(c)
	if err != nil {
		tb.Fatal(err)
	}
	return &mlNode{h: h, tr: tr, ml: ml}
}

func TestSmoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		var nodes []*mlNode
		for i := range 5 {
			nodes = append(nodes, startMember(t, n.NewHost(), fmt.Sprint("node", i), nil))
		}
		for _, nd := range nodes[1:] {
			if _, err := nd.ml.Join([]string{nodes[0].tr.Addr()}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		time.Sleep(30 * time.Second)
		for _, nd := range nodes {
			t.Log(nd.ml.NumMembers())
		}
		t.Logf("%v %+v", time.Since(start), n.Stats())
		for _, nd := range nodes {
			nd.ml.Shutdown()
		}
		time.Sleep(time.Second)
	})
}
