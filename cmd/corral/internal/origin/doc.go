// Package origin is corral serve's loader: it fills a group's keys from an HTTP origin
// (--origin), a URL template with {group} and {key}, for every group of the node — those the
// fronts make, and those a peer asks for.
//
// # Usage
//
//	o, err := origin.New(origin.Config{
//		Template:    "http://api:9000/items/{key}",
//		FillTimeout: 10 * time.Second,
//		MaxBytes:    8 << 20,
//	})
//	if err != nil { … }
//	g, err := corral.NewGroup(node, "items", o.Load("items"), corral.WithCodec[objects.Object](objects.Codec{}))
//	…
//	if err := o.Check("items", key); err != nil { … 400: the origin cannot be asked for key … }
//
// The caller's duties:
//  1. Check a group and key before a read that would fill it, to answer the client why; Load
//     refuses them too, so a fill that a peer or another front started cannot ask for them.
//  2. Refuse leases for groups with an origin: the origin fills them, not the client.
//
// # Definitions
//
// The origin is asked for exactly the key: in the template's path {group} and {key} are
// path-escaped and a name that would be a dot segment is refused; in its query they are
// query-escaped. Its answers: 200 is the value, with its Content-Type, its Surrogate-Key
// tags and its Cache-Control (max-age=N keeps it fresh N seconds, at most 2^31, then stale
// for Grace; no-store keeps nothing; otherwise the group's TTL); 404 is corral.ErrNotFound;
// anything else fails the fill, a redirect too unless Redirects is RedirectsSameHost. A body
// over MaxBytes or a Content-Type over objects.MaxTypeBytes fails the fill. A request whose
// connection could not be made is tried again, up to three times, within FillTimeout.
package origin
