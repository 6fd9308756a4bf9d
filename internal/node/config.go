package node

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

	"github.com/corralcache/corral/internal/fill"
	"github.com/corralcache/corral/internal/peertls"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/memnet"
	"github.com/corralcache/corral/peer"
	"github.com/corralcache/corral/transport"
)

// Config configures a node: corral.Config, whose fields it has (their documentation is
// there), and the seams of the module's own tools. Zero values mean the defaults of
// DefaultConfig.
type Config struct {
	Name          string
	BindAddr      string
	AdvertiseAddr string
	GossipPort    int
	PeerPort      int
	Join          []string
	Registerer    prometheus.Registerer
	Logger        *slog.Logger
	SecretKey     []byte
	Label         string
	PeerTLS       *tls.Config

	SecondaryKeys                              [][]byte
	AcceptPlaintextGossip, SendPlaintextGossip bool

	ProbeInterval       time.Duration
	ProbeTimeout        time.Duration
	GossipInterval      time.Duration
	PushPullInterval    time.Duration
	SuspicionMult       int
	DeadNodeReclaimTime time.Duration
	RejoinInterval      time.Duration
	ReconnectInterval   time.Duration

	PeerTimeout       time.Duration
	PeekTimeout       time.Duration
	SilentPeerTimeout time.Duration
	PeekWindow        time.Duration
	DrainTimeout      time.Duration

	AllowNonMemberPeers bool
	LocalFallback       bool

	MaxValueBytes int
	MaxRefreshes  int
	MaxFills      int

	NearBytes   int64
	NearTTL     time.Duration
	NearPromote int

	// AutoGroup, if set, is called when a peer's request names a group that is not
	// registered on this node; it may register it (corral.Config.AutoGroup).
	AutoGroup func(name string) error
	// OnChange, if set, is called with this node's new view (corral.Config.OnChange).
	OnChange func(members []view.Member)

	// Host, if set, is the in-memory host (package memnet) this node runs on instead of the
	// operating system's network: it binds no port, advertises the host's address, gossips
	// and reaches its peers through the host's network, and reads time without a ticker. It
	// is for tests of a whole cluster in one process, in virtual time (package corraltest
	// sets it through package memhost). BindAddr and AdvertiseAddr are ignored.
	Host *memnet.Host
	Rand *rand.Rand
}

// envelope is the room a peer message needs beside its value: the key, the header and the
// framing. The transport's message limit is MaxValueBytes plus it.
const envelope = 64 << 10

// DefaultPeerPort is the peer port of DefaultConfig, the one after memberlist's.
const DefaultPeerPort = peer.DefaultPort + 1

// DefaultConfig returns the production defaults. The membership's are package peer's, the
// peer calls' package transport's: each is written once, where it is used.
func DefaultConfig() Config {
	p := peer.DefaultConfig()
	t := transport.DefaultClientConfig()
	return Config{
		BindAddr:            p.BindAddr,
		GossipPort:          p.BindPort,
		PeerPort:            DefaultPeerPort,
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
		PeekWindow:          time.Minute,
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
	return checkSelfSeeds(c.GossipPort, c.BindAddr, c.AdvertiseAddr, c.Host != nil, c.Join)
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
