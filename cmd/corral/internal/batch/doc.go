// Package batch is the batch read that corral serve's two fronts share: the Redis protocol's
// MGET and the HTTP API's many-keys form (GET …/keys?key=a&key=b, POST …/keys:batch) check the
// keys alike, read them with one corral GetMany — the keys that miss on this node asked of
// their owners in one request per owner, each key filled once in the cluster, through the
// group's loader (the origin's, with --origin) — and sort what came back into values, keys
// not found and keys that failed. Each front then writes that answer in its own protocol.
//
// # Usage
//
//	a, err := batch.Read(ctx, g, o, keys) // o: the node's *origin.Origin, or nil
//	switch {
//	case errors.Is(err, batch.ErrRefused): // a client error: nothing was read (400, -ERR)
//	case err != nil:                       // the whole read failed: ctx ended, the node closes
//	}
//	for _, key := range keys { v, found := a.Values[key]; … } // in the order asked
//	for _, f := range a.Failed { … f.Key, f.Err … }
//
// The caller's duties:
//  1. Count a refusal (ErrRefused) as the front's limit hit: Read refuses, it counts nothing.
//  2. Hand Read the keys as the client sent them, duplicates included: Read reads each once,
//     and the answer's lists name each once, in the order first asked; a front that answers
//     by position (MGET) answers each position from Values.
//
// # Definitions
//
// A batch is refused whole, before anything is read, when it names more than MaxKeys keys
// (duplicates count), a key that is empty or longer than fill.MaxKeyBytes, or — with an
// origin — a key the origin cannot be asked for (origin.Check). Otherwise every key has one
// answer: its value, not found (its loader or origin said so; without an origin, nothing was
// written under it), or failed, with the error a Get of it alone would have had.
package batch
