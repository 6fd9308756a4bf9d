// Package corral is a distributed read-through cache for Go services on Kubernetes: a hot
// key that expires costs one fill in the whole cluster, with no lock service.
//
// corral is embedded in the application's own pods. Every replica joins one gossip cluster
// (hashicorp/memberlist); a consistent-hash ring with bounded loads gives every key one
// owner; only the owner runs the loader, under local single-flight; every other replica asks
// the owner on the peer port (a Get as a frame on one connection per peer, other calls
// gRPC), with one request for all its concurrent callers. When an owner leaves it hands its
// keys to their new owners; when it dies, every replica routes its keys to the same
// successor, so a crash costs one refill per key, not one per replica.
//
// # Usage
//
//	cfg := corral.DefaultConfig()      // fixed ports, 7946 for gossip and 7947 for the peer port
//	cfg.BindAddr = os.Getenv("POD_IP") // the pod's address; "" = every interface
//	cfg.Join = []string{"dns+shop-cache-corral-headless.default.svc.cluster.local:7946"}
//	cfg.Registerer = prometheus.DefaultRegisterer
//	node, err := corral.New(cfg)
//	if err != nil {
//		return err
//	}
//	defer node.Close(context.Background())
//
//	users, err := corral.NewGroup(node, "users", func(ctx context.Context, id string) (User, error) {
//		return db.LoadUser(ctx, id) // runs once per key per expiry in the whole cluster
//	}, corral.WithTTL(time.Minute), corral.WithJitter(0.1), corral.WithStaleWhileRevalidate(10*time.Second))
//	if err != nil {
//		return err
//	}
//	u, err := users.Get(ctx, "42")
//
// The seed is the headless Service of the chart (charts/corral, release shop-cache): every
// replica's address, at one port. So the ports are fixed: with a "dns+" or "k8s://" seed,
// GossipPort 0 — any free port, what a zero Config means, right for tests on loopback — fails
// New, and so does a seed whose records show this node at another port than its own. With the
// chart, also set Config.Label (the chart's cluster label) and the gossip key
// (ParseSecretKeys reads the chart's key file, mounted from its Secret); the README shows the
// lines, and the chart's install notes print them for a release.
//
// The caller's duties:
//  1. Register every group under the same name with the same loader on every replica, as
//     every replica runs the same binary.
//  2. Close the node on shutdown (SIGTERM), so that it leaves and hands its keys off rather
//     than being detected as dead.
//  3. Let loaders honour their context, and pass it to any Get they make.
//  4. Write the source of truth before calling Set or Remove: a fill that starts after the
//     write reads the source again.
//
// # Get
//
// A Get looks in this node's near cache (copies of hot keys owned elsewhere, kept at most
// Config.NearTTL), then routes: if this node owns the key it serves it from its store or
// fills it; otherwise it asks the owner on the peer port. Concurrent Gets of one key on one node
// share one fill or one owner request, so K Gets on each of N nodes for one expired key run
// the loader once in the cluster. A peer's request is served by its receiver as acting owner
// and never forwarded again, so views that disagree for a moment cost at most one extra fill
// per disagreeing view, never a loop. When the owner cannot be reached, or answers that it is
// leaving, the Get goes to the key's owner on the ring without it — the successor every
// replica computes alike — rather than filling locally (Config.LocalFallback changes that).
//
// A key this node owns is a local hit: one store lookup, with no owner lookup while the
// membership this node found it owned under stands, and no allocation. A remote Get travels
// on the one framed stream this node keeps to the owner, with the Gets of every other caller
// (package transport): the owner answers a value it holds on the stream's receive loop at
// once, and runs fills off it, so a slow fill never delays the hits behind it.
//
// # Failures: crashes, pauses, partitions
//
// A refused or reset connection fails over at once. A silent owner — paused, cut off, its
// answers lost — is found by asking it a question it answers without filling: while Gets wait
// on an owner's stream it is pinged, and a request other than a Get probes it once it has
// waited Config.SilentPeerTimeout; an owner that leaves one unanswered, and says nothing else,
// for SilentPeerTimeout fails over, so a silent owner costs a Get at most that (a quarter more
// for one that falls silent as the Get waits; other requests twice it), not the request's
// deadline. A node whose own timers run late (starved of CPU) adds twice their lateness to the
// bound, and so does a node asking an owner that is starved alone (its answers tell its
// lateness), so that a live owner is not taken for a silent one. A peer found unreachable is skipped
// by the requests after it until it answers one of the probes the node sends it (a breaker, fed
// by what requests see, long before failure detection by gossip agrees), and the first time
// this happens the node probes every member at once: a node cut off from all of them learns it
// from one request and fills its keys itself — one extra fill per isolated side, never a
// failed request the loader could answer. When the two sides meet again, a
// member that one side had declared dead is kept out of that side's ring until the two have
// exchanged the writes they remember, so neither serves a copy the other made older while
// they were apart. During the partition each side serves what it has: a write on one side
// returns nil having told every member that side sees, and the other side learns of it at
// the heal.
//
// # Expiry
//
// TTLs travel between nodes as remaining durations, never as instants, so clock skew does
// not matter. With stale-while-revalidate, a read past TTL but within grace returns the old
// value and starts at most one background refresh, on the owner. Package fill defines TTL,
// grace, jitter and refresh-ahead exactly.
//
// # Writes: Set and Remove
//
// Remove deletes a key on its owner and Set writes through its owner; both then tell every
// member of the write before they return nil. Once a Set or Remove has returned nil, no Get
// anywhere that starts after it returns an older value, through any number of joins, leaves,
// crashes and restarts. When some member could not be told (it crashed and is not yet
// detected, or is cut off), the write still stands and the call returns an *UnreachedError
// naming it; that member may serve the old value until its copy expires.
//
// Why that holds — versions drawn by the writer, every member told before the call returns,
// every copy that moves between members checked against the writes its receiver knows of —
// is told step by step in docs/design.md and in package internal/write.
//
// # Membership changes and refills
//
// A join costs no refill: for Config.PeekWindow after a change, a new owner's first miss of a
// key whose owner changed asks, in parallel and without letting them fill, the key's owners
// on every ring of the window (departed members included) and, while it has only just
// joined, its owner on the ring without itself; if none holds it, every member. A graceful
// leave costs no refill: Close announces that the node is leaving, hands every entry that may
// still be served (fresh, stale within its grace, a remembered not-found) to
// its owner on the ring without every leaving member (entries refused by a member that is
// leaving too go to the next owner) while peers still route to it, then leaves and answers
// the new owners' warm pulls for Config.DrainTimeout. However many joins and leaves overlap,
// the value is found wherever it still is. A crash costs at most one refill per key: every
// survivor routes the dead owner's keys to the same successor.
//
// # Leases: fillers outside the loader
//
// Group.Lease and Group.FillSet let a caller build a missing value itself (corral serve
// offers them over HTTP and the Redis protocol as FILLGET / FILLSET, for services outside
// Go). The key's owner holds the key's lease, so one caller in the cluster gets LeaseFill
// (a token) and builds the value; the others get LeaseBusy, or with LeaseOptions.Wait are
// held — on the owner, through one long-poll peer call from the node they asked — until the
// value is stored (LeaseHit), the lease lapses (one of them gets LeaseFill) or the wait ends.
// A value past its TTL but within its SWR is served stale, with a refresh token for one
// caller. A lease ends when FillSet stores, when its Fill duration passes, when a write of
// the key lands (Set, Remove, SetWithExpiry, another FillSet: the lease's FillSet then stores
// nothing — the write's version is above the lease's, checked under the store's lock), and
// when the key's owner changes in the owner's view (a join or a leave: the new owner grants
// its own, so at most one extra filler per ownership change). A FillSet is a write like Set:
// a version from the owner's clock, a tombstone, every member told before it returns.
//
// # Errors
//
// A failing loader never poisons a key: nothing is stored and the next Get fills again. Every
// caller of a failed fill gets a *FillError: Shared for callers that waited on another's fill,
// Remote for callers on other nodes; ErrNotFound stays ErrNotFound across the wire. A loader
// panic is recovered and reported the same way, its stack logged. A caller whose context
// ends gets ctx.Err() alone; the fill goes on for the others. A loader that asks for a key
// whose fill it is part of — directly, through other groups or through peers, and also when
// the cycle is entered from several keys at once, each fill started by its own caller — gets
// ErrFillCycle at once instead of a deadlock: every wait of a fill on a fill is kept in a wait
// graph (fill.WaitGraph), and the wait that would close a cycle, found by following the
// graph through the members that run the fills, fails.
//
// # Limits
//
// Keys are any bytes, non-empty and at most 4 KiB (valid UTF-8 is not required); values are
// bounded by Config.MaxValueBytes (8 MiB); group names are [a-zA-Z0-9_.-]{1,64}. A request
// that breaks a limit gets a *LimitError naming it and changes nothing else.
//
// # Traces
//
// With Config.TracerProvider (an OpenTelemetry SDK's, or any trace.TracerProvider) every Get,
// GetWithInfo, GetMany, Set, Remove, RemoveByTag, Lease and FillSet is a span, a child of the
// span in its ctx if there is one. Its attributes say how the value was found (corral.source:
// hit, near, peer, fill, coalesced, stale), which member owns the key (corral.owner) and
// whether this node served it from its own store (corral.acting_owner). A Get that asks the
// owner is one trace on both members: a client span here, the owner's server span under it,
// and the loader's run (corral.fill) under that, linked to every Get coalesced onto it, from
// any node. Failovers, open breakers, warm pulls and backups taken are events on the span of
// the request they happen on. Keys are not recorded unless Config.TraceKeys says so (a hash
// or the key). Under a span sampled out (a request whose trace is not kept) corral starts
// no span at all, whatever the sampler, and passes the trace context on; without a TracerProvider nothing
// is traced, and a Get costs what it costs untraced (docs/operations.md, "Traces").
//
// # Peer security
//
// Config.SecretKey encrypts gossip (SetSecretKeys rotates it while running); Config.Label
// keeps clusters that share a network apart. With Config.PeerTLS both ends of every peer
// connection present a certificate and each checks that the other's chains to the CA and
// names a current member: by an IP SAN equal to the member's address, a DNS SAN whose first
// label is the member's name (the pod names a headless Service gives), a CN equal to the
// name, or a wildcard DNS SAN (what a cert-manager Certificate for a StatefulSet's pods
// usually carries). A member whose peer port does not complete mutual TLS with this one is
// never an owner here; the log says why, and corral_members_excluded counts it.
// PeerTLSFromFiles reads the files a cert-manager Secret mounts, and again when they rotate.
// Without PeerTLS, a peer request is served only from a member's address
// (Config.AllowNonMemberPeers turns that off behind a proxy that rewrites addresses).
// SECURITY.md has the threat model and the rotation steps.
//
// Package fill is the in-process engine (and usable alone); ring, peer and transport are the
// ownership ring, the membership and the peer protocol. The protocol behind this package's
// API lives in its internal packages, one per role (their diagram is in package
// internal/group's documentation).
package corral
