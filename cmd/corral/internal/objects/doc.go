// Package objects is what corral serve caches: an Object, a body and its Content-Type as the
// origin or a PUT gave them, put on the wire between peers by Codec, and tagged by the
// Surrogate-Key header of the HTTP message that brought it.
//
// # Usage
//
//	g, err := corral.NewGroup(node, "pages", load, corral.WithCodec[objects.Object](objects.Codec{}))
//	…
//	v := objects.Object{Body: body, Type: r.Header.Get("Content-Type")}
//	err = g.SetWithTags(ctx, key, v, objects.Tags(r.Header)...)
//
// The caller's duties:
//  1. Give every group of objects Codec, on every member: a peer decodes what another encoded.
//  2. Refuse a Content-Type over MaxTypeBytes before it is stored (400 to a PUT, a failed fill
//     for an origin's answer), and give the node a value limit of the body's bound plus
//     Overhead, so that the node's limit counts the user's bytes.
//
// # Definitions
//
// An object's encoding is uvarint(len(Type)) Type Body: at most Overhead bytes more than its
// Body when its Type is within MaxTypeBytes. Its tags are the space-separated words of every
// Surrogate-Key header (SurrogateKeyHeader) of the request or response that carried it.
package objects
