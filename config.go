package corral

import (
	"cmp"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"time"

	sockaddr "github.com/hashicorp/go-sockaddr"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/network"
	"github.com/corralcache/corral/internal/peertls"
	"github.com/corralcache/corral/internal/tracing"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/transport"
)

// Config configures New. The zero value of every field means its default; DefaultConfig
// holds the production defaults. New validates it and does not read it again.
type Config struct {
	Name          string                // member name, unique in the cluster; "" = hostname + random suffix, so a restarted pod never collides with its own dead entry
	BindAddr      string                // interface for gossip and the peer port; "" = "0.0.0.0"
	AdvertiseAddr string                // address peers dial; "" = BindAddr, or when that is 0.0.0.0 the first private address of an interface, else 127.0.0.1
	GossipPort    int                   // memberlist TCP+UDP port; 0 = pick a free port (DefaultConfig: 7946)
	PeerPort      int                   // peer port: Gets framed on one connection per peer, other calls gRPC (see package transport); 0 = pick a free port (DefaultConfig: 7947)
	Join          []string              // seeds: "host:port", "dns+name:port", "k8s://namespace/service" or "k8s://service" (the namespace of $POD_NAMESPACE; both EndpointSlices, with import _ "github.com/corralcache/corral/peer/k8s"); "" entries are ignored
	Registerer    prometheus.Registerer // nil = metrics are not registered
	Logger        *slog.Logger          // nil = discard
	SecretKey     []byte                // gossip encryption key, 16/24/32 bytes (AES-GCM); nil = plaintext gossip
	Label         string                // cluster label; members with another label are never admitted
	PeerTLS       *tls.Config           // mutual TLS on the peer port (framed Gets and gRPC), both directions; nil = plaintext (see "Peer security" for what is checked, PeerTLSFromFiles for files that rotate)

	// SecondaryKeys are more gossip keys, each 16, 24 or 32 bytes, that decrypt incoming
	// gossip beside SecretKey, which alone encrypts what this node sends: the keyring of a key
	// rotation (SetSecretKeys changes it while running; SECURITY.md gives the sequence). nil =
	// SecretKey only. They need SecretKey; at most 8 keys in all.
	SecondaryKeys [][]byte
	// AcceptPlaintextGossip accepts gossip that is not encrypted although SecretKey is set
	// (memberlist's GossipVerifyIncoming = false), and SendPlaintextGossip sends it
	// unencrypted while still reading encrypted gossip (GossipVerifyOutgoing = false): the
	// steps by which a running plaintext cluster turns encryption on, one member at a time
	// (SECURITY.md). false (both) = with SecretKey every packet is encrypted and a plaintext
	// one is dropped. Both need SecretKey; SendPlaintextGossip needs AcceptPlaintextGossip.
	AcceptPlaintextGossip, SendPlaintextGossip bool

	// Membership timing; 0 = memberlist's LAN defaults (see package peer).
	ProbeInterval    time.Duration // failure-detection probe period; 0 = 1 s
	ProbeTimeout     time.Duration // ack wait of one probe; 0 = 500 ms
	GossipInterval   time.Duration // gossip period; 0 = 200 ms
	PushPullInterval time.Duration // full state sync period; 0 = 30 s
	SuspicionMult    int           // suspicion timeout multiplier; 0 = 4
	// DeadNodeReclaimTime is how long a dead member's name stays reserved; 0 = 30 s. It matters
	// only for pinned names (a StatefulSet pod that comes back with a new address).
	DeadNodeReclaimTime time.Duration
	// RejoinInterval is how often seeds that are not members are joined again, so that two
	// pods that each formed a one-node cluster merge; 0 = 30 s, negative = never.
	RejoinInterval time.Duration
	// ReconnectInterval is how often a member tries to reach one member that failed in the
	// last 5 minutes (a full state exchange with it), so that the two sides of a healed
	// partition, which declared each other dead, find each other within seconds rather than a
	// RejoinInterval; each wait is drawn from [d/2, d]. 0 = 1 s, negative = never.
	ReconnectInterval time.Duration

	// PeerTimeout bounds one peer call other than a Get (which may wait on the owner's fill,
	// and is bounded by the group's fill timeout plus PeerTimeout); 0 = 5 s.
	PeerTimeout time.Duration
	// PeekTimeout bounds the question a new owner asks the previous owner of a key on its first
	// miss after a membership change, before it loads; 0 = SilentPeerTimeout (a member that
	// has not answered within it is taken as silent anyway), or 300 ms when that is negative.
	// A busy previous owner that answers later costs the key a fill.
	PeekTimeout time.Duration
	// SilentPeerTimeout is how long a peer may leave a question unanswered while requests
	// wait on it. Gets wait on the peer's stream, which is pinged while they wait (a sixth of
	// it after the first began, then every quarter); other requests (writes, leases) probe the
	// peer once they have waited it, and again after each such interval. A peer that leaves a
	// ping or probe unanswered, and sends nothing else, this long (paused, cut off) is taken
	// as unreachable and the request fails over to the key's next owner; one that answers is
	// filling slowly, and the request waits on. A node whose own timers fire late (starved of
	// CPU) adds twice their recent lateness, and so does a node asking a peer whose answers
	// say it runs late (one starved alone), so that it does not take a live peer for a silent
	// one. 0 = 300 ms: a silent owner costs a Get at most that before the successor is asked
	// (a hit takes a millisecond), another request twice it, and a ping or probe survives one
	// TCP retransmission (200 ms). Negative = never probe.
	SilentPeerTimeout time.Duration
	// PeekWindow is how long after a membership change a new owner asks the previous owner;
	// 0 = 1 min, negative = never.
	PeekWindow time.Duration
	// DrainTimeout is how long Close keeps answering peers after it left and handed off, for
	// peers whose view has not caught up; 0 = 2 s, negative = none.
	DrainTimeout time.Duration

	// AllowNonMemberPeers serves peer requests from any address. By default, without
	// PeerTLS, a peer request is refused unless it comes from a member's address, so that a
	// port scan of the peer port reads and writes nothing; set this where a proxy between the
	// pods (a service mesh's sidecar) rewrites source addresses. With PeerTLS the certificate
	// check decides instead, and this is ignored.
	AllowNonMemberPeers bool

	// LocalFallback fills locally when the owner and its successors cannot be reached, instead
	// of failing over along the ring. Off by default: local fills cost one fill per replica
	// during a crash, while the successor is the owner every replica agrees on.
	LocalFallback bool

	// MaxValueBytes bounds one value on the wire, in bytes; 0 = 8 MiB (the gRPC message limit
	// is derived from it).
	MaxValueBytes int
	// MaxRefreshes bounds background refreshes at once on this node, over all groups; 0 = 64.
	MaxRefreshes int
	// MaxFills bounds loader runs at once on this node, over all groups (admission control);
	// 0 = unbounded.
	MaxFills int

	// NearBytes bounds each group's near cache (copies of hot keys owned elsewhere); 0 = 8 MiB,
	// negative = no near cache.
	NearBytes int64
	// NearTTL caps how long a near copy is served; it never outlives the owner's remaining
	// freshness either. 0 = 1 s.
	NearTTL time.Duration
	// AutoGroup, if set, is called when a peer's request names a group that is not registered
	// on this node; it may register it with NewGroup (corral serve registers every group on
	// demand). Without it, or when it fails, the peer gets an unknown-group error.
	AutoGroup func(n *Node, name string) error

	// NearPromote is how many requests for a remote key within a second make it hot enough to
	// keep a near copy; 0 = 2.
	NearPromote int

	// OnChange, if set, is called with this node's new view (self included, sorted by Name)
	// each time its member set changes, in order, from one goroutine at a time. It must
	// return quickly and must not call Close.
	OnChange func(members []Member)

	// TracerProvider, if set, traces this node's calls with OpenTelemetry: a span per Get,
	// GetWithInfo, GetMany, Set, Remove, RemoveByTag, Lease and FillSet, one per loader run
	// linked to every Get coalesced onto it, and the peer calls as client and server spans
	// in the caller's trace, its W3C trace context carried to the owner (docs/operations.md,
	// "Traces"). The node starts a trace only where the caller's ctx has none, and records
	// what the provider's sampler keeps. nil = no spans, and a Get costs what it did
	// without tracing.
	TracerProvider trace.TracerProvider
	// TraceKeys says what a span records of a key: TraceKeysOff (the zero value) nothing,
	// since a key may be personal data; TraceKeysHash a hash of it (corral.key.hash);
	// TraceKeysRaw the key itself (corral.key).
	TraceKeys TraceKeys

	// Rand is the source of everything this node draws at random — the suffix of a default
	// Name, TTL jitter, refresh-ahead, join backoff — so that a seeded simulation replays.
	// New takes it over: the caller must not use it afterwards. nil = unpredictable.
	Rand *rand.Rand
}

// envelope is the room a peer message needs beside its value: the key, the header and the
// framing. The transport's message limit is MaxValueBytes plus it.
const envelope = 64 << 10

// DefaultConfig returns the production defaults. The membership's are package peer's, the
// peer calls' package transport's, the stores' package fill's: each is written once, where it
// is used, and the rest here, each with its reason.
func DefaultConfig() Config {
	p := peer.DefaultConfig()
	t := transport.DefaultClientConfig()
	return Config{
		BindAddr:            p.BindAddr,
		GossipPort:          p.BindPort,
		PeerPort:            p.BindPort + 1, // the port after memberlist's
		ProbeInterval:       p.ProbeInterval,
		ProbeTimeout:        p.ProbeTimeout,
		GossipInterval:      p.GossipInterval,
		PushPullInterval:    p.PushPullInterval,
		SuspicionMult:       p.SuspicionMult,
		DeadNodeReclaimTime: p.DeadNodeReclaimTime,
		RejoinInterval:      p.RejoinInterval,
		ReconnectInterval:   p.ReconnectInterval,
		PeerTimeout:         t.CallTimeout,
		PeekTimeout:         t.SilentPeerTimeout, // a member that has not answered within it is silent
		SilentPeerTimeout:   t.SilentPeerTimeout,
		PeekWindow:          time.Minute, // well past a rollout's step: the new owners find the old copies
		DrainTimeout:        2 * time.Second,
		MaxValueBytes:       transport.DefaultMaxMessageSize - envelope,
		MaxRefreshes:        fill.DefaultMaxRefreshes,
		NearBytes:           8 << 20,
		NearTTL:             time.Second, // how long a near copy that missed a write (its member unreached) may serve it
		NearPromote:         2,
	}
}

// validate checks c and fills in its defaults.
func (c *Config) validate() error {
	d := DefaultConfig()
	if c.Name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "corral"
		}
		var b [4]byte
		if c.Rand != nil {
			binary.LittleEndian.PutUint32(b[:], c.Rand.Uint32())
		} else {
			crand.Read(b[:])
		}
		c.Name = host + "-" + hex.EncodeToString(b[:])
	}
	c.BindAddr = cmp.Or(c.BindAddr, d.BindAddr)
	if net.ParseIP(c.BindAddr) == nil {
		return fmt.Errorf("corral: BindAddr %q is not an IP address", c.BindAddr)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		return fmt.Errorf("corral: AdvertiseAddr %q is not an IP address", c.AdvertiseAddr)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"GossipPort", c.GossipPort}, {"PeerPort", c.PeerPort}} {
		if p.v < 0 || p.v > 65535 {
			return fmt.Errorf("corral: %s %d out of range", p.name, p.v)
		}
	}
	if c.GossipPort != 0 && c.GossipPort == c.PeerPort {
		return fmt.Errorf("corral: GossipPort and PeerPort are both %d", c.PeerPort)
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		return fmt.Errorf("corral: SecretKey of %d bytes: want 16, 24 or 32", len(c.SecretKey))
	}
	if err := peertls.Check(c.PeerTLS); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"PeerTimeout", c.PeerTimeout}, {"PeekTimeout", c.PeekTimeout}, {"NearTTL", c.NearTTL},
		{"ProbeInterval", c.ProbeInterval}, {"ProbeTimeout", c.ProbeTimeout},
		{"GossipInterval", c.GossipInterval}, {"PushPullInterval", c.PushPullInterval},
		{"DeadNodeReclaimTime", c.DeadNodeReclaimTime}} {
		if f.v < 0 {
			return fmt.Errorf("corral: negative %s %v", f.name, f.v)
		}
	}
	if err := tracing.Keys(c.TraceKeys).Check(); err != nil {
		return err
	}
	if c.MaxValueBytes < 0 || c.MaxRefreshes < 0 || c.MaxFills < 0 || c.NearPromote < 0 || c.SuspicionMult < 0 {
		return fmt.Errorf("corral: negative limit in Config")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.PeerTimeout = cmp.Or(c.PeerTimeout, d.PeerTimeout)
	c.PeekWindow = cmp.Or(c.PeekWindow, d.PeekWindow)
	c.SilentPeerTimeout = cmp.Or(c.SilentPeerTimeout, d.SilentPeerTimeout)
	if c.PeekTimeout == 0 && c.SilentPeerTimeout > 0 {
		c.PeekTimeout = c.SilentPeerTimeout
	}
	c.PeekTimeout = cmp.Or(c.PeekTimeout, d.PeekTimeout)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, d.DrainTimeout)
	c.NearTTL = cmp.Or(c.NearTTL, d.NearTTL)
	c.MaxValueBytes = cmp.Or(c.MaxValueBytes, d.MaxValueBytes)
	c.MaxRefreshes = cmp.Or(c.MaxRefreshes, d.MaxRefreshes)
	c.NearBytes = cmp.Or(c.NearBytes, d.NearBytes)
	c.NearPromote = cmp.Or(c.NearPromote, d.NearPromote)
	return nil
}

// validateOn is validate for a node on nw, with the first half of the self-seed rule
// (selfseed.go): a network of a test's own (one that says what to advertise) is exempt.
func (c *Config) validateOn(nw network.Network) error {
	if err := c.validate(); err != nil {
		return err
	}
	return checkSelfSeeds(c.GossipPort, c.BindAddr, c.AdvertiseAddr, nw.AdvertiseIP() != "", c.Join)
}

// advertiseAddr picks the IP peers dial: AdvertiseAddr, else BindAddr, else (bound to all
// interfaces) the first private address, else loopback.
func advertiseAddr(cfg Config) (string, error) {
	if cfg.AdvertiseAddr != "" {
		return cfg.AdvertiseAddr, nil
	}
	if ip := net.ParseIP(cfg.BindAddr); ip != nil && !ip.IsUnspecified() {
		return cfg.BindAddr, nil
	}
	ip, err := sockaddr.GetPrivateIP()
	if err != nil {
		return "", fmt.Errorf("corral: find an address to advertise: %w", err)
	}
	if ip == "" {
		return "127.0.0.1", nil
	}
	return ip, nil
}

// membershipConfig returns the membership's part of c (package peer's Config), without what
// the node adds once it has started its peer port: its advertised address, meta, callbacks
// and source of randomness.
func (c *Config) membershipConfig() peer.Config {
	var seeds []string
	for _, s := range c.Join {
		if s != "" {
			seeds = append(seeds, s)
		}
	}
	return peer.Config{
		Name:                c.Name,
		BindAddr:            c.BindAddr,
		BindPort:            c.GossipPort,
		Seeds:               seeds,
		SecretKey:           c.SecretKey,
		SecondaryKeys:       c.SecondaryKeys,
		AcceptPlaintext:     c.AcceptPlaintextGossip,
		SendPlaintext:       c.SendPlaintextGossip,
		Label:               c.Label,
		ProbeInterval:       c.ProbeInterval,
		ProbeTimeout:        c.ProbeTimeout,
		GossipInterval:      c.GossipInterval,
		PushPullInterval:    c.PushPullInterval,
		SuspicionMult:       c.SuspicionMult,
		DeadNodeReclaimTime: c.DeadNodeReclaimTime,
		RejoinInterval:      c.RejoinInterval,
		ReconnectInterval:   c.ReconnectInterval,
	}
}
