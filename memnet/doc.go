// Package memnet is an in-memory IP network for testing distributed programs in one process,
// in virtual time: hosts with real-looking "ip:port" addresses, stream connections (a
// net.Listener per port, a dialer for grpc.WithContextDialer), memberlist transports (packets
// and streams, memberlist.NodeAwareTransport), and faults applied at any instant and removed
// at any later one: partitions and one-way cuts, per-link delay, jitter and loss, paused hosts,
// crashed hosts and restarts under the same address.
//
// It is ordinary code, as memberlist's MockNetwork is, so that an application can test itself
// against a cluster of real corral nodes (real memberlist, real gRPC) with no port bound. The
// name says what it is, a network held in memory, the counterpart of package net; the
// simulator that drives histories over it is another package.
//
// Every wait in memnet (a Read, a Write against a full window, an Accept, a dial, a delayed
// packet) is a select over channels and timers. Inside a testing/synctest bubble these block
// durably, so the bubble's clock moves on whenever every goroutine waits: memberlist's 5-second
// failure detection and gRPC's keepalive take no wall-clock time. Outside a bubble the same
// network runs in real time.
//
// # Usage
//
//	func TestCluster(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			n, _ := memnet.New(memnet.Config{
//				Rand: rand.New(rand.NewPCG(seed, 0)),
//				Link: memnet.Link{Delay: time.Millisecond, Jitter: time.Millisecond},
//			})
//			a, b := n.NewHost(), n.NewHost() // 10.0.0.1, 10.0.0.2
//
//			// memberlist: one Transport per member.
//			tr, _ := a.NewTransport(7946)
//			cfg := memberlist.DefaultLANConfig()
//			cfg.Name, cfg.Transport = "a", tr
//			ml, _ := memberlist.Create(cfg)
//			defer ml.Shutdown()
//
//			// gRPC: a Listener for the server, the host's DialContext for clients.
//			ln, _ := b.Listen(7947)
//			go grpcServer.Serve(ln)
//			cc, _ := grpc.NewClient("passthrough:///"+b.Addr(7947),
//				grpc.WithContextDialer(a.DialContext),
//				grpc.WithTransportCredentials(insecure.NewCredentials()))
//
//			// Faults at chosen virtual instants.
//			time.Sleep(5 * time.Second)
//			n.Partition([]*memnet.Host{a}, []*memnet.Host{b})
//			time.AfterFunc(10*time.Second, n.Heal)
//			...
//		})
//	}
//
// # The caller's duties
//
//  1. Make the Network inside the bubble that uses it (synctest panics when a goroutine
//     operates on a channel of another bubble), one Network per bubble.
//  2. After a host's Crash, stop the software that ran on it (memberlist's Shutdown, the gRPC
//     server's Stop and clients' Close): memnet cuts it off the network but cannot stop its
//     goroutines. Do it before Restart: DialContext serves the host's current life, and cannot
//     tell a dial of the previous life's gRPC client from one of the new life's. (A Transport
//     or Listener is tied to the life it was made in and stays dead.)
//  3. After memberlist's Shutdown, let virtual time pass before the bubble's function returns
//     (sleep until the goroutines are gone; see "memberlist in a bubble" below): a bubble whose
//     root has returned stops its clock, and a goroutine still waiting on a timer is then
//     reported as a deadlock.
//  4. Give every Read a deadline or an owner that closes its Conn: a stalled stream stalls for
//     ever, as TCP does (memnet has no retransmission give-up), and a bubble in which every
//     goroutine waits with no timer pending panics.
//
// # Addresses
//
// NewHost numbers hosts 10.0.0.1, 10.0.0.2, …, 10.0.0.254, 10.0.1.1, …; AddHost takes any IP.
// Each host has a stream port space (Listen, the stream side of a Transport) and a packet port
// space (the packet side of a Transport); port 0 picks a free port from 32768 up, as do the
// local ends of dials. Addresses are resolved by IP only: a host name fails as an unknown
// host, so configure peers by "ip:port". Connection ends report *net.TCPAddr, packets
// *net.UDPAddr, so code that parses or type-switches on addresses works unchanged.
//
// # Links
//
// Each ordered pair of hosts is a link: Config.Link unless SetLink overrides it (ClearLink
// restores it). A link's Delay and Jitter delay each packet and each stream segment, drawn
// when it is sent; a host's link to itself has no delay. Loss drops packets; on streams it
// costs time instead (TCP retransmits): a lost segment arrives 200 ms late, a lost SYN or SYN-ACK
// delays the dial by 1 s, then 2 s, 4 s, …, as Linux's retransmission timers do.
//
// # Faults
//
// Every fault takes effect at the virtual instant it is applied and is removed by its undo.
// What each does:
//
//	fault                     packets                    new dials                  existing streams
//	Cut(from, to)             from→to lost (also those   between them: hang until   between them: stall both
//	  undo: Uncut, Heal       in flight); to→from pass   undone or their deadline   ways (TCP needs the ACKs)
//	Partition(sides...)       between sides: lost        between sides: hang        between sides: stall
//	  undo: Heal, Uncut       both ways
//	SetLink(from, to, l)      delayed, jittered, lost    take the round trip, and   delayed; lost segments
//	  undo: ClearLink         as l says                  1 s, 2 s, … per lost SYN   arrive 200 ms late
//	h.Pause()                 from h: lost; to h: queued from h: hang; to h:        to or from h: stall
//	  undo: h.Resume()        (Config.PacketQueue) and   complete, but Accept waits
//	                          delivered on Resume        until Resume
//	h.Crash()                 to h: lost; queued: lost;  to h: refused              with an end on h: h's end
//	  undo: h.Restart()       from h: fail (ErrClosed)   (ECONNREFUSED); from h:    closed (net.ErrClosed);
//	                                                     fail (ErrHostDown)         far end reset (ECONNRESET)
//
// "Stall" means the bytes wait, in order, and move the instant the fault is undone: a stream
// is reliable, it never loses bytes silently; it delivers them in order or ends with an error.
// While stalled, writes go on until Config.Window bytes wait unread, then block; reads block;
// deadlines fire. A reset needs a path too: a crashed host's reset reaches a peer across a
// partition only once the partition heals (its kernel answers the peer's retransmission with
// a reset), so a peer cut off from a crash sees a stall, then the reset. A paused host is a
// stopped process (SIGSTOP): its goroutines here keep running, but nothing they send leaves,
// nothing sent to them is read until Resume, and its kernel still completes dials to it. A
// crashed host is a killed process whose kernel stays up: its ports refuse dials, its
// connections are reset. A host that is unplugged (a machine crash) is a host Partition cuts
// off from all others, then Crash, then Heal once its peers should see resets. Restart brings
// a crashed host back under the same address with nothing listening; a new Transport and new
// Listeners take the ports.
//
// # Streams
//
// A Conn is TCP as far as the code above it can tell: a dial returns after one round trip (or
// is refused after one), bytes arrive in order after the link's delay and never before bytes
// written earlier, Write blocks while Config.Window bytes are unread (backpressure), Close sends
// a FIN after the bytes written (the far end reads them, then io.EOF), and bytes written to an
// end that has closed vanish. Deadlines work as net.Conn's: once passed, Read and Write fail
// at once with an error that wraps os.ErrDeadlineExceeded and is a net.Error timeout; a new
// deadline applies to a call already waiting. Errors wrap what the kernel's would
// (syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EADDRINUSE, syscall.EMSGSIZE, net.ErrClosed)
// in *net.OpError. A dial whose ctx has no deadline gives up after Config.ConnectTimeout (127 s,
// as Linux's SYN retries do); a dial to an address with no host hangs until then.
//
// # Packets
//
// A Transport's packets are UDP: WriteToAddress never blocks and returns no error for a packet
// that cannot arrive (it is dropped and traced), only for one that is too large or sent from a
// closed Transport. Packets may overtake each other when the link has jitter. Each arrives on
// PacketCh with its arrival time as Timestamp, through one goroutine per Transport that Shutdown
// stops; at most Config.PacketQueue wait for memberlist to read them, and more are dropped, as a
// full socket buffer drops them. memberlist routes by address, and so does memnet: the node name
// of memberlist.Address is ignored.
//
// # Determinism
//
// synctest makes time deterministic, not the order in which goroutines run. memnet keeps its
// own part reproducible: every random choice (jitter, loss) comes from Config.Rand, through one
// generator per link seeded from one number drawn at New and the link's two addresses, so the
// choices on a link depend on that link's traffic only; ties between packets due at one instant
// go in the order they were sent; nothing iterates a map where order shows. Config.Trace sees
// every event (Event) in one total order, for comparing runs.
//
// The rest is the caller's. memberlist draws from math/rand's process-wide source; seed it
// (rand.Seed, which needs //go:debug randseednop=0 in the test's main package or a _test.go
// file) and run one history per process at a time, or histories draw each other's numbers.
// Events of independent goroutines at one virtual instant run in an order no seed controls
// (select picks among ready cases with the runtime's own generator; the race detector shuffles
// the scheduler): members started at one instant fire their tickers at one instant for ever,
// since virtual clocks do not drift. Start each member at its own seeded instant, and give
// intervals that divide each other (memberlist's 200 ms gossip and 1 s probe) a seeded offset.
// MEASUREMENTS.md says how often a seed replays with and without these.
//
// # memberlist in a bubble
//
// memberlist works unchanged over a Transport: DefaultLANConfig, joins, push/pull, TCP
// fallback pings, suspicion and refutation. Its probe goroutine outlives Shutdown until its ack
// timer fires (up to ProbeInterval × AwarenessMaxMultiplier, 8 s with the LAN defaults), which
// is why duty 3 exists. A send on a Transport that is closed fails with a *net.OpError
// ("write", "udp"), as NetTransport's closed socket does, which memberlist treats as a remote
// failure.
//
// # gRPC in a bubble
//
// grpc-go works unchanged over Listener and DialContext: unary and streaming calls, deadlines,
// keepalive, reconnect backoff, all in virtual time, with no goroutine blocking outside the
// bubble. Its reconnect backoff draws jitter from math/rand/v2's unseedable global source;
// set backoff.Config.Jitter to 0 where a run must replay.
package memnet
