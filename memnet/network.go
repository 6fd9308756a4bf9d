package memnet

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Defaults for the zero Config fields.
const (
	// DefaultWindow is how many bytes one direction of a stream holds before Write blocks: the
	// order of a Linux socket's send plus receive buffer on a LAN.
	DefaultWindow = 256 << 10

	// DefaultPacketQueue is how many packets wait for one endpoint's reader before more are
	// dropped: a UDP receive buffer of about 200 KiB holds that many small gossip packets.
	DefaultPacketQueue = 1024

	// DefaultMaxPacket is the largest packet WriteTo accepts, UDP's payload limit over IPv4.
	DefaultMaxPacket = 65507

	// DefaultConnectTimeout bounds a dial whose ctx has no deadline: Linux gives up on a
	// connection after 6 SYN retransmissions, 1+2+4+8+16+32+64 seconds.
	DefaultConnectTimeout = 127 * time.Second

	// DefaultBacklog is how many connections wait in a listener's accept queue; a dial to a
	// full queue is refused.
	DefaultBacklog = 1024
)

const (
	// synRetransmit is the first wait before a lost SYN is sent again (Linux's initial RTO);
	// it doubles at each loss.
	synRetransmit = time.Second
	// segmentRetransmit is how late a lost stream segment arrives: Linux's minimum RTO.
	segmentRetransmit = 200 * time.Millisecond
	// firstEphemeralPort is where a host starts numbering the local ports of its dials and of
	// listeners bound to port 0 (Linux's ip_local_port_range starts there).
	firstEphemeralPort = 32768
)

// Config configures New. The zero value is a network with no delay and no loss whose random
// choices come from a fixed seed.
type Config struct {
	// Rand is the source of every random choice the network makes: jitter, packet and segment
	// loss. New draws one number from it and none after, so the caller may go on using it. From
	// that number each ordered pair of hosts gets its own generator, seeded from the number and
	// the two addresses, so the choices on one link depend only on the traffic on that link, not
	// on how goroutines on other links were scheduled. nil = a generator with seed (0, 0).
	Rand *rand.Rand

	// Link is what every pair of hosts starts with, in each direction (SetLink overrides it for
	// one pair). The zero Link delivers at once and loses nothing.
	Link Link

	// Window is how many bytes one direction of a stream holds unread before Write blocks.
	// 0 = DefaultWindow.
	Window int

	// PacketQueue is how many packets wait for one Transport's reader (memberlist) before the
	// next ones are dropped. 0 = DefaultPacketQueue.
	PacketQueue int

	// MaxPacket is the largest packet, in bytes; WriteTo refuses larger ones with an error, as
	// UDP does (EMSGSIZE). 0 = DefaultMaxPacket.
	MaxPacket int

	// ConnectTimeout bounds a dial whose ctx has no deadline, as the kernel's SYN retries do.
	// 0 = DefaultConnectTimeout.
	ConnectTimeout time.Duration

	// Backlog is the length of a listener's accept queue. 0 = DefaultBacklog.
	Backlog int

	// Trace, if set, is called for every event on the network (see Event), in the order the
	// events happen. It is called with the network's lock held: it must be quick, must not
	// block and must not call the Network or anything on it.
	Trace func(Event)
}

// validate checks cfg and returns it with defaults filled in.
func (cfg Config) validate() (Config, error) {
	if err := cfg.Link.validate(); err != nil {
		return cfg, fmt.Errorf("memnet: Config.Link: %w", err)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Window", int64(cfg.Window)},
		{"PacketQueue", int64(cfg.PacketQueue)},
		{"MaxPacket", int64(cfg.MaxPacket)},
		{"ConnectTimeout", int64(cfg.ConnectTimeout)},
		{"Backlog", int64(cfg.Backlog)},
	} {
		if f.v < 0 {
			return cfg, fmt.Errorf("memnet: Config.%s is negative (%d)", f.name, f.v)
		}
	}
	cfg.Window = cmp.Or(cfg.Window, DefaultWindow)
	cfg.PacketQueue = cmp.Or(cfg.PacketQueue, DefaultPacketQueue)
	cfg.MaxPacket = cmp.Or(cfg.MaxPacket, DefaultMaxPacket)
	cfg.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, DefaultConnectTimeout)
	cfg.Backlog = cmp.Or(cfg.Backlog, DefaultBacklog)
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(0, 0))
	}
	return cfg, nil
}

// Network is an in-memory IP network of hosts. Its methods, and those of everything on it, are
// safe for concurrent use.
//
// A Network owns no goroutines and needs no Close: the goroutines that serve it belong to the
// Transports on it (stopped by Shutdown) and to the callers of its blocking methods.
type Network struct {
	cfg  Config
	seed uint64 // drawn from cfg.Rand once; seeds each link's generator

	// mu guards everything below and the state of every Host, Listener, Transport and Conn on
	// this network. One lock for the whole network keeps every state change in one total
	// order, the order Trace sees.
	mu     sync.Mutex
	hosts  []*Host // in the order they were added
	byIP   map[netip.Addr]*Host
	links  map[pair]Link       // overrides of cfg.Link
	cuts   map[pair]bool       // one-way cuts: no packet or stream byte from→to
	rands  map[pair]*rand.Rand // each link's generator, made on first use
	nextID uint64              // conn ids, for a deterministic order when many conns change at once
	stats  Stats
	// changed is closed, and replaced, when the network's shape changes (a cut, pause, crash or
	// new host), waking every goroutine that waits for a link to flow again.
	changed chan struct{}
}

// pair is an ordered pair of hosts: one direction of a link.
type pair struct{ from, to *Host }

// New returns an empty network.
func New(cfg Config) (*Network, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return &Network{
		cfg:     cfg,
		seed:    cfg.Rand.Uint64(),
		byIP:    make(map[netip.Addr]*Host),
		links:   make(map[pair]Link),
		cuts:    make(map[pair]bool),
		rands:   make(map[pair]*rand.Rand),
		changed: make(chan struct{}),
	}, nil
}

// ErrHostExists is returned by AddHost for an address that already has a host.
var ErrHostExists = errors.New("memnet: host exists")

// NewHost adds a host with the next free address of 10.0.0.0/16 (10.0.0.1, 10.0.0.2, …,
// 10.0.0.254, 10.0.1.1, …) and returns it.
func (n *Network) NewHost() *Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := len(n.hosts); ; i++ {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i / 254), byte(i%254 + 1)})
		if n.byIP[ip] == nil {
			return n.addHostLocked(ip)
		}
	}
}

// AddHost adds a host with the given IP address ("10.1.2.3", "fd00::1").
func (n *Network) AddHost(ip string) (*Host, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, fmt.Errorf("memnet: AddHost: %w", err)
	}
	a = a.Unmap()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byIP[a] != nil {
		return nil, fmt.Errorf("%w: %s", ErrHostExists, a)
	}
	return n.addHostLocked(a), nil
}

func (n *Network) addHostLocked(ip netip.Addr) *Host {
	h := &Host{
		n:          n,
		ip:         ip,
		listeners:  make(map[int]acceptor),
		endpoints:  make(map[int]*Transport),
		conns:      make(map[*Conn]struct{}),
		ephemeral:  firstEphemeralPort,
		generation: 1,
	}
	n.hosts = append(n.hosts, h)
	n.byIP[ip] = h
	n.traceLocked(Event{Kind: EventHostUp, From: ip.String()})
	// A dial to this address may be waiting for it.
	n.changedLocked()
	return h
}

// Host returns the host with the given IP address, or nil.
func (n *Network) Host(ip string) *Host {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byIP[a.Unmap()]
}

// Hosts returns every host, in the order they were added.
func (n *Network) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.hosts)
}

// changedLocked wakes every goroutine waiting for the network's shape to change.
func (n *Network) changedLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *Network) traceLocked(e Event) {
	if n.cfg.Trace == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	n.cfg.Trace(e)
}

// Stats counts what happened on a network since New.
type Stats struct {
	PacketsSent      int64 // WriteTo calls that put a packet on the wire (not refused)
	PacketsDelivered int64 // packets handed to a Transport's reader
	PacketsDropped   int64 // packets lost: cut, loss, paused or down sender, no receiver, full queue
	Dials            int64 // dials attempted
	DialsRefused     int64 // dials answered with ECONNREFUSED
	DialsTimedOut    int64 // dials that ended at their deadline or ctx
	Conns            int64 // connections established
	Resets           int64 // connection ends that saw a reset (a crash, a closed listener)
	StreamBytes      int64 // bytes written to streams
}

// Stats returns the counters.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}
