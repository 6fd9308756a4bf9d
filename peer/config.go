package peer

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultPort is the gossip port of DefaultConfig, memberlist's and Serf's customary port.
const DefaultPort = 7946

// Config configures New. Every field's zero value means its default, which is given in its comment;
// DefaultConfig returns the production defaults written out. New copies what it needs: a Config is
// not read again after New returns.
type Config struct {
	// Name identifies this member; it must be unique in the cluster. Required.
	//
	// A member that restarts under the name of its own old, not yet reaped entry with a new
	// address is refused until that entry has left, or has been dead for DeadNodeReclaimTime.
	// Names with a random suffix never hit this.
	Name string

	// BindAddr is the IP address to listen on for gossip (TCP and UDP). "" means "0.0.0.0", all
	// IPv4 interfaces. Must be an IP literal.
	BindAddr string
	// BindPort is the gossip port, for TCP and UDP alike. 0 picks a free port; GossipAddr tells
	// which. DefaultConfig: DefaultPort.
	BindPort int

	// AdvertiseAddr is the IP address other members use to reach this one. "" means the address
	// bound to, or, when bound to "0.0.0.0", the first private (RFC 1918 / RFC 6598) address of
	// an interface; New fails when there is none. Must be an IP literal.
	AdvertiseAddr string
	// AdvertisePort is the port other members use to reach this one (behind a NAT or a port
	// mapping). 0 means the bound port.
	AdvertisePort int

	// Meta is published to every member. Meta.RingVersion 0 means RingVersion; a member admits
	// only peers that publish the same ring version as its own. Meta.StartedAt zero means the
	// time New is called.
	Meta Meta

	// Seeds are members to join, each "host:port" (an IP literal or a DNS name) or
	// "dns+name:port" (a DNS name with many A/AAAA records, such as a Kubernetes headless
	// Service). Names are looked up with Resolver on every attempt, and every address found is
	// joined, except this member's own. The port is required. nil means start a one-node
	// cluster and wait to be joined. "scheme://target" works for a scheme registered with
	// RegisterScheme (import github.com/corralcache/corral/peer/k8s for "k8s://namespace/service");
	// an unregistered scheme makes New fail.
	Seeds []string

	// SecretKey enables gossip encryption (AES-GCM) with a key of 16, 24 or 32 bytes; every
	// member must use the same key. nil or empty means plaintext gossip.
	SecretKey []byte
	// SecondaryKeys are more keys, each 16, 24 or 32 bytes, that decrypt incoming gossip
	// beside SecretKey, which alone encrypts what this member sends: a keyring, for rotating
	// the key without a split (SetKeys changes it while running). nil means SecretKey only;
	// they need SecretKey.
	SecondaryKeys [][]byte
	// AcceptPlaintext accepts gossip that is not encrypted although SecretKey is set
	// (memberlist's GossipVerifyIncoming false), and SendPlaintext sends gossip unencrypted
	// (memberlist's GossipVerifyOutgoing false) while encrypted gossip is still read: the
	// steps that let a running plaintext cluster turn encryption on, one member at a time.
	// false (both) means with a key, every packet is encrypted and a plaintext one is
	// dropped. Both need SecretKey, and SendPlaintext needs AcceptPlaintext (members that send
	// plaintext but refuse it would not hear each other).
	AcceptPlaintext, SendPlaintext bool

	// Label is written on every gossip packet and stream; members with another label (or with
	// none, when this one has one) are never admitted, so two clusters sharing a network and a
	// port cannot merge by accident. "" means no label. At most 255 bytes.
	Label string

	// ProbeInterval is the time between two failure-detection probes of a random member. 0 means
	// 1s (memberlist's LAN default): a dead member is suspected within about a second.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for an ack before asking other members to probe
	// indirectly. It should be the 99th percentile of round trips. 0 means 500ms (memberlist's LAN
	// default, generous for one data center or cluster).
	ProbeTimeout time.Duration
	// GossipInterval is the time between two gossip rounds, which spread joins, leaves and
	// failures. 0 means 200ms (memberlist's LAN default): news reaches a small cluster in a few
	// hundred milliseconds.
	GossipInterval time.Duration
	// PushPullInterval is the time between two full state exchanges with a random member, which
	// repair whatever gossip lost. 0 means 30s (memberlist's LAN default; it is scaled up for
	// clusters larger than 32).
	PushPullInterval time.Duration
	// SuspicionMult scales how long a suspected member may refute before it is declared dead:
	// SuspicionMult × max(1, log10(members)) × ProbeInterval. 0 means 4 (memberlist's LAN
	// default): a crashed member is declared dead about 5s after it stops answering.
	SuspicionMult int
	// DeadNodeReclaimTime is how long a dead member's name stays bound to its old address. A
	// member claiming the name from another address is refused until then (a "conflicting
	// address"). 0 means 30s, which lets a pod that pins its name (a StatefulSet) come back with
	// a new IP. memberlist's own default, never, would refuse it until the dead entry is reaped.
	DeadNodeReclaimTime time.Duration
	// StreamTimeout bounds dialing and every read and write of a TCP exchange with a member
	// (joins, full state exchanges, TCP fallback probes). 0 means 10s (memberlist's LAN default).
	StreamTimeout time.Duration

	// JoinTimeout bounds one join attempt: the lookup of every seed and the state exchange with
	// every address found. 0 means 5s.
	JoinTimeout time.Duration
	// JoinBackoffMin and JoinBackoffMax bound the wait between join attempts while no seed has
	// been reached: it starts near JoinBackoffMin and doubles up to JoinBackoffMax, each wait
	// drawn from [d/2, d]. 0 means 200ms and 10s.
	JoinBackoffMin, JoinBackoffMax time.Duration
	// RejoinInterval is the time between two re-joins, once a seed has been reached, of the
	// seed addresses that are not members. This heals a split cluster: pods that started
	// together and each formed a one-node cluster, or two halves that declared each other dead.
	// 0 means 30s; negative means never.
	RejoinInterval time.Duration
	// ReconnectInterval is the time between two attempts, each a full state exchange, to reach
	// one member picked at random among those that failed (not left) in the last
	// ReconnectWindow. A partition heals through them: the two sides have declared each other
	// dead, memberlist probes only live members, and seeds are re-joined only every
	// RejoinInterval. A member back at its address is found within about ReconnectInterval
	// divided by the number of members trying. Each wait is drawn from [d/2, d]. 0 means 1s;
	// negative means never.
	ReconnectInterval time.Duration
	// ReconnectWindow is how long after a member failed it is tried again. 0 means 5m.
	ReconnectWindow time.Duration

	// Resolver looks up seed names. nil means net.DefaultResolver.
	Resolver Resolver
	// Transport, if set, carries gossip instead of UDP and TCP sockets on BindAddr:BindPort:
	// an in-memory network's (package memnet) for tests in one process and in virtual time.
	// BindPort must then be the transport's port, or 0 when the transport has a Port or
	// GetAutoBindPort method; Membership shuts it down on Close. nil means real sockets.
	Transport memberlist.NodeAwareTransport
	// NoCompression turns off memberlist's compression of gossip. Compression saves bandwidth
	// on a real network and costs about a quarter of gossip's CPU; an in-memory network
	// (Transport set) has no bandwidth to save. false means compressed, memberlist's default.
	NoCompression bool
	// Rand is the source of this package's randomness (the jitter of join backoff and of
	// reconnects, the member a reconnect tries), so that a
	// seeded simulation replays. New takes it over: the caller must not use it afterwards.
	// nil means an unpredictable source.
	Rand *rand.Rand
	// Logger receives this package's logs and memberlist's (with component=memberlist, at the
	// level memberlist gave them). nil means no logs.
	Logger *slog.Logger

	// OnChange, if set, is called with the full live set (self included, even after Leave;
	// sorted by Name) after the live set or a member's Meta changes, starting with the set that
	// holds only this member.
	// Calls come from one goroutine, in order, never concurrently; a burst of changes may be
	// delivered as one call, but the last call always reflects the final state. It must return
	// quickly, and must not call Close. ms is the callee's to keep.
	OnChange func(ms []Member)
	// LocalState, if set, returns state to send to a member in a full state exchange
	// (memberlist's push-pull: when this member joins one, when one joins this member, and
	// every PushPullInterval with a random member); join says whether the exchange is a
	// join. The other member's MergeState receives it. It is called from memberlist's
	// goroutines, several at once, and must be quick.
	LocalState func(join bool) []byte
	// MergeState, if set, receives another member's LocalState in a full state exchange.
	// The bytes come from the network (from a member that holds the gossip key, when there
	// is one): it must check them. Called like LocalState.
	MergeState func(buf []byte, join bool)

	// OnEvent, if set, is called for every join, leave, failure and update (this member's own
	// join and updates included; its own Leave makes no event), from the goroutine that calls
	// OnChange, before the OnChange call that reflects it. Events are queued in memory while it runs, so it must return quickly, and must not call
	// Close.
	OnEvent func(Event)
}

// DefaultConfig returns the production defaults, each field as its zero value would make it;
// Name is left for the caller.
func DefaultConfig() Config {
	return Config{
		BindAddr:            "0.0.0.0",
		BindPort:            DefaultPort,
		Meta:                Meta{RingVersion: RingVersion},
		ProbeInterval:       time.Second,
		ProbeTimeout:        500 * time.Millisecond,
		GossipInterval:      200 * time.Millisecond,
		PushPullInterval:    30 * time.Second,
		SuspicionMult:       4,
		DeadNodeReclaimTime: 30 * time.Second,
		StreamTimeout:       10 * time.Second,
		JoinTimeout:         5 * time.Second,
		JoinBackoffMin:      200 * time.Millisecond,
		JoinBackoffMax:      10 * time.Second,
		RejoinInterval:      30 * time.Second,
		ReconnectInterval:   time.Second,
		ReconnectWindow:     5 * time.Minute,
	}
}

// settings is a validated Config with every default filled in.
type settings struct {
	Config
	seeds []seed
}

// validate checks c and fills its defaults. It reports every problem it finds, not only the
// first.
func (c Config) validate() (settings, error) {
	d := DefaultConfig()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("peer: "+format, args...))
	}

	if c.Name == "" {
		bad("Name is required")
	}
	if c.BindAddr == "" {
		c.BindAddr = d.BindAddr
	} else if _, err := netip.ParseAddr(c.BindAddr); err != nil {
		bad("BindAddr %q is not an IP address", c.BindAddr)
	}
	if c.AdvertiseAddr != "" {
		if _, err := netip.ParseAddr(c.AdvertiseAddr); err != nil {
			bad("AdvertiseAddr %q is not an IP address", c.AdvertiseAddr)
		}
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		bad("BindPort %d is not in 0-65535", c.BindPort)
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		bad("AdvertisePort %d is not in 0-65535", c.AdvertisePort)
	}

	if c.Meta.RingVersion == 0 {
		c.Meta.RingVersion = RingVersion
	}
	if c.Meta.StartedAt.IsZero() {
		c.Meta.StartedAt = time.Now()
	}
	if err := c.Meta.validate(); err != nil {
		errs = append(errs, err)
	}

	seeds, err := parseSeeds(c.Seeds)
	if err != nil {
		errs = append(errs, err)
	}

	switch len(c.SecretKey) {
	case 0:
	case 16, 24, 32:
		if err := checkKeys(c.SecretKey, c.SecondaryKeys); err != nil {
			errs = append(errs, err)
		}
	default:
		bad("SecretKey is %d bytes; want 16, 24 or 32", len(c.SecretKey))
	}
	switch {
	case len(c.SecretKey) == 0 && len(c.SecondaryKeys) > 0:
		bad("SecondaryKeys without SecretKey")
	case len(c.SecretKey) == 0 && (c.AcceptPlaintext || c.SendPlaintext):
		bad("AcceptPlaintext or SendPlaintext without SecretKey: gossip is plaintext anyway")
	case c.SendPlaintext && !c.AcceptPlaintext:
		bad("SendPlaintext needs AcceptPlaintext: members that send plaintext and refuse it would not hear each other")
	}
	if len(c.Label) > memberlist.LabelMaxSize {
		bad("Label is %d bytes, limit %d", len(c.Label), memberlist.LabelMaxSize)
	}

	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ProbeInterval", &c.ProbeInterval, d.ProbeInterval},
		{"ProbeTimeout", &c.ProbeTimeout, d.ProbeTimeout},
		{"GossipInterval", &c.GossipInterval, d.GossipInterval},
		{"PushPullInterval", &c.PushPullInterval, d.PushPullInterval},
		{"DeadNodeReclaimTime", &c.DeadNodeReclaimTime, d.DeadNodeReclaimTime},
		{"StreamTimeout", &c.StreamTimeout, d.StreamTimeout},
		{"JoinTimeout", &c.JoinTimeout, d.JoinTimeout},
		{"JoinBackoffMin", &c.JoinBackoffMin, d.JoinBackoffMin},
		{"JoinBackoffMax", &c.JoinBackoffMax, d.JoinBackoffMax},
		{"RejoinInterval", &c.RejoinInterval, d.RejoinInterval},
		{"ReconnectInterval", &c.ReconnectInterval, d.ReconnectInterval},
		{"ReconnectWindow", &c.ReconnectWindow, d.ReconnectWindow},
	}
	for _, f := range durations {
		switch {
		case *f.v < 0 && f.name != "RejoinInterval" && f.name != "ReconnectInterval":
			bad("%s %v is negative", f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	if c.SuspicionMult < 0 {
		bad("SuspicionMult %d is negative", c.SuspicionMult)
	} else if c.SuspicionMult == 0 {
		c.SuspicionMult = d.SuspicionMult
	}
	if c.JoinBackoffMin > c.JoinBackoffMax {
		bad("JoinBackoffMin %v is above JoinBackoffMax %v", c.JoinBackoffMin, c.JoinBackoffMax)
	}

	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	// Copies of what the caller could change after New returns.
	c.Seeds = append([]string(nil), c.Seeds...)
	c.SecretKey = append([]byte(nil), c.SecretKey...)
	c.SecondaryKeys = cloneKeys(c.SecondaryKeys)

	if err := errors.Join(errs...); err != nil {
		return settings{}, err
	}
	return settings{Config: c, seeds: seeds}, nil
}
