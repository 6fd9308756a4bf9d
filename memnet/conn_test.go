package memnet_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corralcache/corral/memnet"
)

const port = 7947

// twoHosts returns a network with hosts a and b, a listener on b:7947, and a connection from a
// (ac) accepted on b (bc). Everything is closed at the end of the test.
func twoHosts(t *testing.T, cfg memnet.Config) (n *memnet.Network, a, b *memnet.Host, ln *memnet.Listener, ac, bc net.Conn) {
	t.Helper()
	n, err := memnet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b = n.NewHost(), n.NewHost()
	ln, err = b.Listen(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ac, err = a.DialContext(t.Context(), b.Addr(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ac.Close() })
	bc, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bc.Close() })
	return n, a, b, ln, ac, bc
}

// readAsync reads once from c in a goroutine; the result arrives on the channel, with the
// virtual time the read took.
type readResult struct {
	data string
	err  error
	took time.Duration
}

func readAsync(c net.Conn) <-chan readResult {
	ch := make(chan readResult, 1)
	start := time.Now()
	go func() {
		buf := make([]byte, 64)
		k, err := c.Read(buf)
		ch <- readResult{string(buf[:k]), err, time.Since(start)}
	}()
	return ch
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func TestDialTakesOneRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{})
		a, b := n.NewHost(), n.NewHost()
		if err := n.SetLink(a, b, memnet.Link{Delay: 3 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if err := n.SetLink(b, a, memnet.Link{Delay: 7 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		ln, _ := b.Listen(port)
		defer ln.Close()
		start := time.Now()
		c, err := a.DialContext(t.Context(), b.Addr(port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := time.Since(start); got != 10*time.Millisecond {
			t.Errorf("dial took %v, want 10ms (one round trip)", got)
		}
		if got, want := c.LocalAddr().(*net.TCPAddr).IP.String(), a.IP(); got != want {
			t.Errorf("LocalAddr %v, want host %s", c.LocalAddr(), want)
		}
		if got, want := c.RemoteAddr().String(), "10.0.0.2:7947"; got != want {
			t.Errorf("RemoteAddr %s, want %s", got, want)
		}
	})
}

func TestBytesArriveAfterDelayInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, a, b, _, ac, bc := twoHosts(t, memnet.Config{})
		n.SetLink(a, b, memnet.Link{Delay: 5 * time.Millisecond, Jitter: 5 * time.Millisecond})
		for _, s := range []string{"a", "b", "c", "d"} {
			write(t, ac, s)
		}
		got := ""
		start := time.Now()
		for len(got) < 4 {
			r := <-readAsync(bc)
			if r.err != nil {
				t.Fatal(r.err)
			}
			got += r.data
		}
		if got != "abcd" {
			t.Errorf("read %q, want abcd (in order)", got)
		}
		if took := time.Since(start); took < 5*time.Millisecond || took >= 10*time.Millisecond {
			t.Errorf("bytes took %v, want in [5ms, 10ms)", took)
		}
	})
}

func TestDeadlinesFireInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, _, _, ac, _ := twoHosts(t, memnet.Config{Window: 4})
		ac.SetReadDeadline(time.Now().Add(3 * time.Second))
		r := <-readAsync(ac)
		if !errors.Is(r.err, os.ErrDeadlineExceeded) || r.took != 3*time.Second {
			t.Errorf("read: %v after %v, want a deadline error after 3s", r.err, r.took)
		}
		var ne net.Error
		if !errors.As(r.err, &ne) || !ne.Timeout() {
			t.Errorf("read error %v is not a net.Error timeout", r.err)
		}

		// A deadline set while a Read waits applies to it.
		ac.SetReadDeadline(time.Time{})
		ch := readAsync(ac)
		time.Sleep(time.Second)
		ac.SetReadDeadline(time.Now().Add(time.Second))
		if r := <-ch; !errors.Is(r.err, os.ErrDeadlineExceeded) || r.took != 2*time.Second {
			t.Errorf("read: %v after %v, want a deadline error after 2s", r.err, r.took)
		}

		// Nobody reads b's end, so the window (4 bytes) fills and Write waits.
		ac.SetWriteDeadline(time.Now().Add(time.Second))
		start := time.Now()
		k, err := ac.Write([]byte("0123456789"))
		if k != 4 || !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Write = %d, %v after %v; want 4, a deadline error after 1s", k, err, time.Since(start))
		}
	})
}

func TestCloseGivesEOFAfterData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, _, _, ac, bc := twoHosts(t, memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
		write(t, ac, "bye")
		ac.Close()
		data, err := io.ReadAll(bc)
		if string(data) != "bye" || err != nil {
			t.Errorf("ReadAll = %q, %v; want bye, nil", data, err)
		}
		if _, err := ac.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read after Close: %v, want net.ErrClosed", err)
		}
		if err := ac.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v, want net.ErrClosed", err)
		}
	})
}

func TestRefusedAndUnreachable(t *testing.T) {
	tests := []struct {
		name        string
		addr        func(b *memnet.Host) string
		wantRefused bool
	}{
		{"no listener", func(b *memnet.Host) string { return b.Addr(9999) }, true},
		{"crashed host", func(b *memnet.Host) string { b.Crash(); return b.Addr(port) }, true},
		{"no such host", func(*memnet.Host) string { return "10.9.9.9:7947" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n, _ := memnet.New(memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
				a, b := n.NewHost(), n.NewHost()
				ln, _ := b.Listen(port)
				defer ln.Close()
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				start := time.Now()
				c, err := a.DialContext(ctx, tt.addr(b))
				took := time.Since(start)
				if c != nil {
					t.Errorf("a failed dial returned a non-nil net.Conn (%#v)", c)
				}
				if tt.wantRefused {
					if !errors.Is(err, syscall.ECONNREFUSED) || took != 2*time.Millisecond {
						t.Errorf("dial: %v after %v, want ECONNREFUSED after one round trip", err, took)
					}
					return
				}
				if !errors.Is(err, os.ErrDeadlineExceeded) || took != 5*time.Second {
					t.Errorf("dial: %v after %v, want a timeout at the ctx deadline (5s)", err, took)
				}
			})
		})
	}
}

// TestFaultsOnStreams checks what each fault does to a connection that exists, to a new dial
// and to the connection once the fault is removed.
func TestFaultsOnStreams(t *testing.T) {
	tests := []struct {
		name  string
		apply func(n *memnet.Network, a, b *memnet.Host)
		undo  func(n *memnet.Network, a, b *memnet.Host)
	}{
		{"partition",
			func(n *memnet.Network, a, b *memnet.Host) { n.Partition([]*memnet.Host{a}, []*memnet.Host{b}) },
			func(n *memnet.Network, a, b *memnet.Host) { n.Heal() }},
		// TCP needs both directions: a one-way cut stalls both.
		{"one-way cut b to a",
			func(n *memnet.Network, a, b *memnet.Host) { n.Cut([]*memnet.Host{b}, []*memnet.Host{a}) },
			func(n *memnet.Network, a, b *memnet.Host) { n.Heal() }},
		{"pause dialer", func(n *memnet.Network, a, b *memnet.Host) { a.Pause() },
			func(n *memnet.Network, a, b *memnet.Host) { a.Resume() }},
		{"pause acceptor", func(n *memnet.Network, a, b *memnet.Host) { b.Pause() },
			func(n *memnet.Network, a, b *memnet.Host) { b.Resume() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n, a, b, _, ac, bc := twoHosts(t, memnet.Config{Link: memnet.Link{Delay: time.Millisecond}})
				tt.apply(n, a, b)

				// Bytes either way wait; a read with a deadline times out.
				write(t, ac, "ping")
				write(t, bc, "pong")
				bc.SetReadDeadline(time.Now().Add(time.Second))
				if r := <-readAsync(bc); !errors.Is(r.err, os.ErrDeadlineExceeded) {
					t.Fatalf("read during fault: %q, %v; want a timeout", r.data, r.err)
				}
				bc.SetReadDeadline(time.Time{})
				toB, toA := readAsync(bc), readAsync(ac)
				time.Sleep(10 * time.Second)
				select {
				case r := <-toB:
					t.Fatalf("b read %q, %v during the fault", r.data, r.err)
				case r := <-toA:
					t.Fatalf("a read %q, %v during the fault", r.data, r.err)
				default:
				}

				// A new dial from a waits for the fault to go (or its deadline). A dial to a
				// paused host completes but is not accepted until it resumes.
				dialed := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
					defer cancel()
					c, err := a.DialContext(ctx, b.Addr(port))
					if err == nil {
						c.Close()
					}
					dialed <- err
				}()
				time.Sleep(5 * time.Second)
				pausedAcceptor := tt.name == "pause acceptor"
				select {
				case err := <-dialed:
					if !pausedAcceptor || err != nil {
						t.Fatalf("dial during the fault returned %v", err)
					}
				default:
					if pausedAcceptor {
						t.Fatal("dial to a paused host did not complete")
					}
				}

				// Once the fault is undone, everything moves, in order, at once.
				healed := time.Now()
				tt.undo(n, a, b)
				if r := <-toB; r.data != "ping" || r.err != nil || time.Since(healed) != 0 {
					t.Errorf("b read %q, %v %v after undo; want ping at once", r.data, r.err, time.Since(healed))
				}
				if r := <-toA; r.data != "pong" || r.err != nil {
					t.Errorf("a read %q, %v; want pong", r.data, r.err)
				}
				if !pausedAcceptor {
					if err := <-dialed; err != nil {
						t.Errorf("dial after undo: %v", err)
					}
				}
			})
		})
	}
}

func TestCrashResetsPeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, a, b, _, ac, bc := twoHosts(t, memnet.Config{Link: memnet.Link{Delay: 2 * time.Millisecond}})
		read := readAsync(ac)
		write(t, ac, "lost") // in flight when b crashes: lost with it
		b.Crash()
		r := <-read
		if !errors.Is(r.err, syscall.ECONNRESET) || r.took != 2*time.Millisecond {
			t.Errorf("a's read: %v after %v; want ECONNRESET after the link delay (2ms)", r.err, r.took)
		}
		if _, err := ac.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("a's write after reset: %v, want ECONNRESET", err)
		}
		if _, err := bc.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("the crashed end's read: %v, want net.ErrClosed", err)
		}
		if _, err := b.Listen(port); !errors.Is(err, memnet.ErrHostDown) {
			t.Errorf("Listen on a crashed host: %v, want ErrHostDown", err)
		}
		if _, err := a.DialContext(t.Context(), b.Addr(port)); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial to a crashed host: %v, want ECONNREFUSED", err)
		}

		// Restart: the same address serves again.
		if err := b.Restart(); err != nil {
			t.Fatal(err)
		}
		ln, err := b.Listen(port)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c, err := a.DialContext(t.Context(), b.Addr(port))
		if err != nil {
			t.Fatalf("dial after restart: %v", err)
		}
		c.Close()
		if err := b.Restart(); !errors.Is(err, memnet.ErrHostUp) {
			t.Errorf("Restart of a host that is up: %v, want ErrHostUp", err)
		}
		_ = n
	})
}

func TestResetWaitsForThePathToHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, a, b, _, ac, _ := twoHosts(t, memnet.Config{})
		n.Partition([]*memnet.Host{a}, []*memnet.Host{b})
		b.Crash()
		read := readAsync(ac)
		time.Sleep(time.Minute)
		select {
		case r := <-read:
			t.Fatalf("read returned %v across a partition", r.err)
		default:
		}
		n.Heal()
		if r := <-read; !errors.Is(r.err, syscall.ECONNRESET) || r.took != time.Minute {
			t.Errorf("read: %v after %v; want ECONNRESET once healed", r.err, r.took)
		}
	})
}

func TestLostSYNIsRetransmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := memnet.New(memnet.Config{})
		a, b := n.NewHost(), n.NewHost()
		n.SetLink(a, b, memnet.Link{Loss: 1})
		ln, _ := b.Listen(port)
		defer ln.Close()
		go func() {
			time.Sleep(2500 * time.Millisecond) // after the retransmissions at 1s and 3s… fail
			n.ClearLink(a, b)
		}()
		start := time.Now()
		c, err := a.DialContext(t.Context(), b.Addr(port))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		// Attempts at 0s (lost, retry after 1s), 1s (lost, retry after 2s), 3s: connects.
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("dial took %v, want 3s (two lost SYNs)", took)
		}
	})
}

func TestListenErrors(t *testing.T) {
	n, _ := memnet.New(memnet.Config{})
	h := n.NewHost()
	ln, err := h.Listen(port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Listen(port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second Listen: %v, want EADDRINUSE", err)
	}
	ln.Close()
	ln, err = h.Listen(port)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	ln.Close()
	any, err := h.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	defer any.Close()
	if p := any.Addr().(*net.TCPAddr).Port; p < 32768 {
		t.Errorf("Listen(0) picked port %d, want an ephemeral one", p)
	}
}

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  memnet.Config
	}{
		{"negative window", memnet.Config{Window: -1}},
		{"negative queue", memnet.Config{PacketQueue: -1}},
		{"negative connect timeout", memnet.Config{ConnectTimeout: -time.Second}},
		{"negative delay", memnet.Config{Link: memnet.Link{Delay: -1}}},
		{"negative jitter", memnet.Config{Link: memnet.Link{Jitter: -1}}},
		{"loss over 1", memnet.Config{Link: memnet.Link{Loss: 1.5}}},
		{"loss NaN", memnet.Config{Link: memnet.Link{Loss: math.NaN()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := memnet.New(tt.cfg); err == nil {
				t.Error("New: no error")
			}
		})
	}
	n, err := memnet.New(memnet.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := n.NewHost(), n.NewHost()
	if err := n.SetLink(a, b, memnet.Link{Loss: -0.1}); err == nil {
		t.Error("SetLink with negative loss: no error")
	}
	if _, err := n.AddHost("10.0.0.1"); !errors.Is(err, memnet.ErrHostExists) {
		t.Errorf("AddHost of a taken address: %v, want ErrHostExists", err)
	}
	if _, err := n.AddHost("not an ip"); err == nil {
		t.Error("AddHost of a name: no error")
	}
	h, err := n.AddHost("fd00::7")
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Addr(7946); got != "[fd00::7]:7946" || n.Host("fd00::7") != h {
		t.Errorf("IPv6 host: Addr %s, Host lookup %v", got, n.Host("fd00::7"))
	}
	if _, err := b.DialContext(t.Context(), "name.example:80"); err == nil {
		t.Error("dial to a host name: no error")
	}
}
