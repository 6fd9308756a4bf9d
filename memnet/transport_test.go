package memnet_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/memnet"
)

// transports returns k hosts, each with a Transport on 7946, shut down at the end of the test.
func transports(t *testing.T, n *memnet.Network, k int) []*memnet.Transport {
	t.Helper()
	var ts []*memnet.Transport
	for range k {
		tr, err := n.NewHost().NewTransport(7946)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Shutdown() })
		ts = append(ts, tr)
	}
	return ts
}

// drain receives every packet that arrives at tr by now (once the bubble is idle).
func drain(tr *memnet.Transport) []*memberlist.Packet {
	var got []*memberlist.Packet
	for {
		synctest.Wait()
		select {
		case p := <-tr.PacketCh():
			got = append(got, p)
		default:
			return got
		}
	}
}

func send(t *testing.T, from, to *memnet.Transport, payload string) {
	t.Helper()
	if _, err := from.WriteTo([]byte(payload), to.Addr()); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
}

func TestPacketArrivesAfterDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: 4 * time.Millisecond}})
		ts := transports(t, n, 2)
		start := time.Now()
		buf := []byte("hello")
		sent, err := ts[0].WriteToAddress(buf, memberlist.Address{Addr: ts[1].Addr(), Name: "ignored"})
		if err != nil || !sent.Equal(start) {
			t.Fatalf("WriteToAddress = %v, %v", sent, err)
		}
		buf[0] = 'j' // the caller may reuse its buffer
		p := <-ts[1].PacketCh()
		if string(p.Buf) != "hello" || p.From.String() != ts[0].Addr() || p.Timestamp.Sub(start) != 4*time.Millisecond {
			t.Errorf("got %q from %v at +%v; want hello from %s at +4ms", p.Buf, p.From, p.Timestamp.Sub(start), ts[0].Addr())
		}
		if _, ok := p.From.(*net.UDPAddr); !ok {
			t.Errorf("From is a %T, want *net.UDPAddr", p.From)
		}
	})
}

// TestFaultsOnPackets checks whether a packet a→b arrives under each fault, and when.
func TestFaultsOnPackets(t *testing.T) {
	type hosts struct{ a, b *memnet.Host }
	tests := []struct {
		name    string
		apply   func(n *memnet.Network, h hosts)
		undo    func(n *memnet.Network, h hosts)
		arrives bool // before undo
		later   bool // after undo, sent before it
	}{
		{"none", func(*memnet.Network, hosts) {}, func(*memnet.Network, hosts) {}, true, true},
		{"cut a to b", func(n *memnet.Network, h hosts) { n.Cut([]*memnet.Host{h.a}, []*memnet.Host{h.b}) },
			func(n *memnet.Network, _ hosts) { n.Heal() }, false, false},
		{"cut b to a", func(n *memnet.Network, h hosts) { n.Cut([]*memnet.Host{h.b}, []*memnet.Host{h.a}) },
			func(n *memnet.Network, _ hosts) { n.Heal() }, true, true},
		{"partition", func(n *memnet.Network, h hosts) { n.Partition([]*memnet.Host{h.a}, []*memnet.Host{h.b}) },
			func(n *memnet.Network, _ hosts) { n.Heal() }, false, false},
		{"uncut", func(n *memnet.Network, h hosts) {
			n.Partition([]*memnet.Host{h.a}, []*memnet.Host{h.b})
			n.Uncut([]*memnet.Host{h.a}, []*memnet.Host{h.b}) // b→a stays cut
		}, func(n *memnet.Network, _ hosts) { n.Heal() }, true, true},
		{"loss 1", func(n *memnet.Network, h hosts) { n.SetLink(h.a, h.b, memnet.Link{Loss: 1}) },
			func(n *memnet.Network, h hosts) { n.ClearLink(h.a, h.b) }, false, false},
		// A paused process does not send; its kernel queues what comes in until it resumes.
		{"pause sender", func(_ *memnet.Network, h hosts) { h.a.Pause() },
			func(_ *memnet.Network, h hosts) { h.a.Resume() }, false, false},
		{"pause receiver", func(_ *memnet.Network, h hosts) { h.b.Pause() },
			func(_ *memnet.Network, h hosts) { h.b.Resume() }, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
				ts := transports(t, n, 2)
				h := hosts{ts[0].Host(), ts[1].Host()}
				tt.apply(n, h)
				send(t, ts[0], ts[1], "during")
				time.Sleep(time.Second)
				if got := len(drain(ts[1])); (got == 1) != tt.arrives {
					t.Errorf("during the fault: %d packets arrived, want arrives=%v", got, tt.arrives)
				}
				tt.undo(n, h)
				if got := len(drain(ts[1])); (got == 1) != (tt.later && !tt.arrives) {
					t.Errorf("after undo: %d held packets arrived, want %v", got, tt.later && !tt.arrives)
				}
				send(t, ts[0], ts[1], "after")
				time.Sleep(time.Second)
				if got := len(drain(ts[1])); got != 1 {
					t.Errorf("after undo: %d new packets arrived, want 1", got)
				}
			})
		})
	}
}

func TestPacketCutInFlightIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: 10 * time.Millisecond}})
		ts := transports(t, n, 2)
		send(t, ts[0], ts[1], "x")
		time.Sleep(5 * time.Millisecond)
		n.Partition([]*memnet.Host{ts[0].Host()}, []*memnet.Host{ts[1].Host()})
		time.Sleep(10 * time.Millisecond) // past the packet's arrival at 10ms
		n.Heal()
		if got := drain(ts[1]); len(got) != 0 {
			t.Errorf("a packet cut in flight arrived")
		}
	})
}

func TestPacketQueueAndSizeLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{PacketQueue: 3, MaxPacket: 8, Link: memnet.Link{Delay: time.Millisecond}})
		ts := transports(t, n, 2)
		for i := range 5 {
			send(t, ts[0], ts[1], fmt.Sprint(i))
		}
		// All five were in flight at once: the queue held three.
		time.Sleep(time.Millisecond)
		got := drain(ts[1])
		if len(got) != 3 {
			t.Errorf("%d of 5 packets arrived with a queue of 3, want 3", len(got))
		}
		if _, err := ts[0].WriteTo([]byte("123456789"), ts[1].Addr()); !errors.Is(err, syscall.EMSGSIZE) {
			t.Errorf("WriteTo over MaxPacket: %v, want EMSGSIZE", err)
		}
		if s := n.Stats(); s.PacketsSent != 5 || s.PacketsDropped != 2 || s.PacketsDelivered != 3 {
			t.Errorf("Stats = %+v", s)
		}
	})
}

func TestCrashClosesTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		ts := transports(t, n, 2)
		send(t, ts[0], ts[1], "queued") // in flight: lost with the crash
		b := ts[1].Host()
		b.Crash()
		send(t, ts[0], ts[1], "to a crashed host")
		if _, err := ts[1].WriteTo([]byte("zombie"), ts[0].Addr()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("WriteTo from a crashed host: %v, want net.ErrClosed", err)
		}
		if _, err := ts[1].DialTimeout(ts[0].Addr(), time.Second); !errors.Is(err, memnet.ErrHostDown) {
			t.Errorf("dial from a crashed host: %v, want ErrHostDown", err)
		}
		if got := drain(ts[1]); len(got) != 0 {
			t.Errorf("%d packets arrived at a crashed host", len(got))
		}
		// Restart under the same address; the old transport stays dead.
		b.Restart()
		tr, err := b.NewTransport(7946)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Shutdown()
		if _, err := ts[1].WriteTo([]byte("zombie"), ts[0].Addr()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("WriteTo from the previous life: %v, want net.ErrClosed", err)
		}
		send(t, ts[0], tr, "again")
		time.Sleep(time.Millisecond)
		if got := drain(tr); len(got) != 1 {
			t.Errorf("%d packets arrived after restart, want 1", len(got))
		}
		tr.Shutdown()
		if _, err := tr.DialTimeout(ts[0].Addr(), time.Second); !errors.Is(err, net.ErrClosed) {
			t.Errorf("dial from a Transport after Shutdown: %v, want net.ErrClosed", err)
		}
	})
}

// TestLossIsSeededPerLink checks that which packets are lost depends on the seed and on the
// link's own traffic only: traffic on another link, interleaved differently, changes nothing.
func TestLossIsSeededPerLink(t *testing.T) {
	run := func(seed uint64, noise int) []int {
		var got []int
		synctest.Test(t, func(t *testing.T) {
			n, _ := memnet.New(memnet.Config{Rand: rand.New(rand.NewPCG(seed, 0)), Link: memnet.Link{Loss: 0.5}})
			ts := transports(t, n, 3)
			for i := range 100 {
				for range noise {
					send(t, ts[2], ts[1], "noise")
				}
				send(t, ts[0], ts[1], fmt.Sprint(i))
				for _, p := range drain(ts[1]) {
					if p.From.String() == ts[0].Addr() {
						got = append(got, int(p.Buf[0]))
					}
				}
			}
		})
		return got
	}
	a, b, c := run(1, 0), run(1, 3), run(2, 0)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("traffic on another link changed which packets were lost")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("seeds 1 and 2 lost the same packets")
	}
	if len(a) < 30 || len(a) > 70 {
		t.Errorf("%d of 100 packets arrived with loss 0.5", len(a))
	}
}

func TestFinalAdvertiseAddr(t *testing.T) {
	n, _ := memnet.New(memnet.Config{})
	tr, err := n.NewHost().NewTransport(0)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	tests := []struct {
		ip       string
		port     int
		wantIP   string
		wantPort int
	}{
		{"", 7946, "10.0.0.1", tr.Port()}, // as NetTransport: no ip, the bound address
		{"10.1.1.1", 8000, "10.1.1.1", 8000},
	}
	for _, tt := range tests {
		ip, p, err := tr.FinalAdvertiseAddr(tt.ip, tt.port)
		if err != nil || ip.String() != tt.wantIP || p != tt.wantPort {
			t.Errorf("FinalAdvertiseAddr(%q, %d) = %v, %d, %v; want %s, %d", tt.ip, tt.port, ip, p, err, tt.wantIP, tt.wantPort)
		}
	}
	if _, _, err := tr.FinalAdvertiseAddr("not-an-ip", 1); err == nil {
		t.Error("FinalAdvertiseAddr of a host name: no error")
	}
}
