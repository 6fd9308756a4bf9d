// Package peer is corral's cluster membership: which replicas are live, and where each one
// serves peer requests. It is a thin layer over github.com/hashicorp/memberlist (SWIM gossip with
// suspicion and full state exchanges) that adds typed member metadata, refusal of incompatible
// members, seeds that are re-resolved and re-joined until a split cluster heals, and events that
// tell a graceful leave from a failure. It imports no other corral package.
//
// # Usage
//
//	m, err := peer.New(peer.Config{
//		Name:     name,                                  // unique: hostname + random suffix
//		BindPort: peer.DefaultPort,                      // TCP and UDP
//		Meta:     peer.Meta{PeerAddr: grpcAddr},         // what peers dial for keys
//		Seeds:    []string{"dns+corral-headless:7946"}, // every pod behind the Service
//		OnChange: func(ms []peer.Member) { ring.Set(ms) },
//	})
//	if err != nil {
//		return err
//	}
//	// … serve …
//	_ = m.Leave(ctx) // peers see EventLeave and drop this member at once
//	_ = m.Close()
//
// The caller must:
//
//  1. Give every member a unique Name. A member restarted under its old name from a new address
//     is refused while peers still hold its old entry as alive, and until the entry has been
//     dead for DeadNodeReclaimTime (see "Conflicting addresses").
//  2. Publish a PeerAddr that the other members can dial, and an AdvertiseAddr they can reach
//     when the bound address is not it (bound to "0.0.0.0", memberlist advertises the first
//     private address of an interface).
//  3. Keep OnChange and OnEvent quick, and never call Close from them: Close waits for them.
//  4. Call Leave before Close when shutting down on purpose; Close alone looks like a crash.
//  5. Call Close once done, to stop gossip and every goroutine this package started.
//
// # Definitions
//
// Live member: a member in memberlist state alive or suspect. A suspected member has missed a
// probe and may still refute; it leaves the live set only once declared dead. Members and
// OnChange report live members sorted by Name, this one always included: after Leave it keeps
// serving (handing keys off, draining) until Close, and only peers drop it.
//
// Events: EventJoin when a member becomes live (this one included, once, at New), EventUpdate
// when a live member publishes new Meta, EventLeave when a member left gracefully, EventFail when
// it was declared dead. There is no event about this member's own Leave. memberlist reports the last two alike; Leave first publishes a
// "leaving" flag in the member's meta and waits for it to spread, and a peer reports EventLeave
// when the departing member's last meta it saw carries that flag. A peer that missed the flag
// reports EventFail; both remove the member.
//
// Refusal: a member whose meta cannot be decoded, or whose RingVersion differs from this
// member's, never enters the live set: memberlist drops its alive messages (AliveDelegate), and a
// join between clusters holding such members fails on both sides (MergeDelegate). The first
// refusal of a member for a reason is logged at Warn, the next at Debug. Members with another
// Label, or another SecretKey, cannot even read each other's packets.
//
// Refused joins: a seed with another Label or SecretKey says why in its own log only; the
// joiner's join just ends. The joiner reads how it ended (refusal.go) and says what that
// suggests, at Warn once per seed and reason ("seed refused this member's join", with the
// seed and a diagnosis), in the *JoinRefusedError of Join, in JoinRefusals and in
// JoinRefusedCount: RefusedKey and RefusedEncryption when the seed's answer shows another
// key or encryption on one side only, RefusedLabel — likely, not certain — when the seed
// closed the connection without answering, which is what a member does with a stream of
// another label.
//
// Keys: SecretKey encrypts what this member sends, and it and SecondaryKeys decrypt what it
// receives; SetKeys changes them while running, so a key is rotated by three rounds of SetKeys
// over all members (new key accepted, new key primary, old key removed). AcceptPlaintext and
// SendPlaintext are memberlist's GossipVerifyIncoming and GossipVerifyOutgoing, inverted so that
// false is the strict default; they are fixed at New, so turning encryption on takes rolling
// restarts (TestGossipEncryptionModesThatMeet shows which modes understand each other).
//
// Seeds: "host:port", "dns+name:port", or "scheme://target" of a registered scheme (see
// "Discovery schemes"). A name is looked up on every attempt, and every address found is joined
// except this member's own, so a headless Service works as the seed of every pod, including the
// first. New makes one attempt bounded by JoinTimeout. Until some seed has been
// reached (or another member has joined this one) a background loop retries with backoff between
// JoinBackoffMin and JoinBackoffMax; afterwards it re-joins, every RejoinInterval, the seed
// addresses that are not live members. That heals two pods that started together and each formed
// a one-node cluster. A "dns+" or "k8s://" seed names every member of a service at one port:
// New fails when such a seed shows this member's own (non-loopback) address at another port
// than the one it is reached at, since nobody would find it there (see selfseed.go).
//
// Leaving: Leave waits for its broadcasts to go out, at most a few gossip rounds (3.2s with
// the LAN defaults; see broadcast.go), and returns nil when no other member is live any more —
// every member stopping at once leaves the last ones nobody to tell, which is a normal end.
//
// Two sides of a partition that declared each other dead heal sooner: memberlist probes and
// exchanges state only with members it holds live, so about every ReconnectInterval (1s) each
// member pings one member that failed (not left) in the last ReconnectWindow (5m), by name, and
// runs a full state exchange with it when it answers. Each side then learns the other holds it
// dead and refutes that. With every member trying, a 100-member cluster cut in a third and two
// thirds for 30s agrees again 1.5–2.5s after the heal (sim's TestSimScale; 9.7s with re-joins
// alone). A ping names the member it is for and only that member answers, so an address that
// another process has taken since (a pod's IP reused) is sent nothing.
//
// # Discovery schemes
//
// A seed "scheme://target" is found by a Discoverer rather than by DNS. Package peer knows no
// scheme itself: a package registers one with RegisterScheme from its init function, as
// database/sql drivers do, so a program links the code (and the dependencies) of a scheme only
// when it imports that package:
//
//	import _ "github.com/corralcache/corral/peer/k8s" // registers k8s://namespace/service
//
// A seed of an unregistered scheme makes New fail, naming the package to import when it is one of
// corral's. For each such seed in Config.Seeds, New:
//
//  1. calls the scheme's open with the target while it validates the Config (a bad target fails
//     New, and nothing has started yet);
//  2. runs the Discoverer from its first join attempt until Close, and waits at most JoinTimeout
//     for its first set of addresses;
//  3. joins, on every attempt, the addresses the Discoverer reported last, as it joins the
//     addresses of a name; and
//  4. wakes the join loop at once when the Discoverer reports addresses it had not reported
//     before, and joins those that are not members: a new pod is joined when it appears, not a
//     RejoinInterval later. Addresses that disappear need nothing: failure detection or the
//     member's own Leave removes it.
//
// Join (the method) runs the Discoverers of its seeds only until it returns.
//
// # Conflicting addresses
//
// memberlist binds a name to an address. When a member claims a known name from another address,
// it is refused (logged as a name conflict) unless the known entry has left, or has been dead for
// DeadNodeReclaimTime. A crashed pod that comes back quickly under the same name (a StatefulSet)
// is therefore admitted after failure detection plus DeadNodeReclaimTime; one that called Leave
// is admitted at once. Names with a random suffix never conflict.
//
// # Timings
//
// With the defaults (memberlist's LAN values), a join is one TCP exchange; news of a join or leave
// reaches a small cluster within a few gossip rounds (200ms each); a crashed member is suspected
// after a failed probe (about 1s) and declared dead SuspicionMult × ProbeInterval later (4s in a
// cluster under 10 members, more in larger ones, and up to 6 times more when no other member
// confirms the suspicion); Leave takes about two rounds of retransmissions (under a second in a
// small cluster).
package peer
