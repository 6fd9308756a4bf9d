// Package objects is what corral serve caches and where: an Object, a body and its
// Content-Type as the origin or a PUT gave them, put on the wire between peers by Codec and
// tagged by the Surrogate-Key header of the HTTP message that brought it; and Groups, the
// node's groups of objects, each made on first use with the daemon's options and bounded in
// number by --max-groups.
//
// # Usage
//
//	groups, err := objects.NewGroups(objects.GroupsConfig{
//		Load:       o.Load, // an *origin.Origin's; nil: values only from writes
//		Options:    []corral.GroupOption{corral.WithTTL(time.Minute)},
//		MaxGroups:  64,
//		Configured: []string{"pages"},
//	})
//	…
//	cfg.AutoGroup = func(n *corral.Node, name string) error { _, err := groups.Group(n, name); return err }
//	node, err := corral.New(cfg)
//	…
//	g, err := groups.Group(node, "pages")
//	v := objects.Object{Body: body, Type: r.Header.Get("Content-Type")}
//	err = g.SetWithTags(ctx, key, v, objects.Tags(r.Header)...)
//
// The caller's duties:
//  1. Make every group of objects through Groups (or give it Codec), on every member: a peer
//     decodes what another encoded.
//  2. Give the node Groups.Group as its Config.AutoGroup, so that a group a peer asks for is
//     made with the same options, and counts against the same bound.
//  3. Refuse a Content-Type over MaxTypeBytes before it is stored (400 to a PUT, a failed fill
//     for an origin's answer), and give the node a value limit of the body's bound plus
//     Overhead, so that the node's limit counts the user's bytes.
//
// # Definitions
//
// An object's encoding is uvarint(len(Type)) Type Body: at most Overhead bytes more than its
// Body when its Type is within MaxTypeBytes. Its tags are the space-separated words of every
// Surrogate-Key header (SurrogateKeyHeader) of the request or response that carried it.
//
// A group counts against MaxGroups when it was configured or holds a value on this node. A new
// group is refused (ErrTooManyGroups) when as many count already, or when twice as many exist.
package objects
