// Package corral is a distributed read-through cache for Go services on Kubernetes: a hot
// key that expires costs one fill in the whole cluster, with no lock service.
//
// corral is embedded in the application's own pods. Every replica joins one gossip cluster
// (hashicorp/memberlist); a consistent-hash ring with bounded loads gives every key one
// owner; only the owner runs the loader, under local single-flight; every other replica asks
// the owner over gRPC, with one request for all its concurrent callers. When an owner leaves
// it hands its keys to their new owners; when it dies, every replica routes its keys to the
// same successor, so a crash costs one refill per key, not one per replica.
//
// # Usage
//
//	node, err := corral.New(corral.Config{
//		Join:       []string{"dns+myapp-corral.default.svc.cluster.local:7946"},
//		Registerer: prometheus.DefaultRegisterer,
//	})
//	if err != nil { … }
//	defer node.Close(context.Background())
//
//	users, err := corral.NewGroup(node, "users", func(ctx context.Context, id string) (User, error) {
//		return db.LoadUser(ctx, id) // runs once per key per expiry in the whole cluster
//	}, corral.WithTTL(time.Minute), corral.WithJitter(0.1), corral.WithStaleWhileRevalidate(10*time.Second))
//	if err != nil { … }
//	u, err := users.Get(ctx, "42")
//
// The caller's duties:
//  1. Register every group under the same name with the same loader on every replica, as
//     every replica runs the same binary.
//  2. Close the node on shutdown (SIGTERM), so that it leaves and hands its keys off rather
//     than being detected as dead.
//  3. Let loaders honour their context, and pass it to any Get they make.
//
// See DESIGN.md for the semantics of Get, ownership under churn, expiry, Remove and Set,
// errors and limits; package fill for the definitions of TTL, grace, jitter and refresh.
package corral
