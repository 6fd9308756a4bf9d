// Package apitoken is corral serve's API token (--api-token-file): the secret a client shows to
// write, to be granted a lease, and with --api-token-reads to read, over the HTTP API
// (Authorization: Bearer <token>) and over the Redis protocol (AUTH <token>).
//
// # Usage
//
//	tok, err := apitoken.Load("/etc/corral/token")
//	if err != nil { … }
//	if !tok.Bearer(r.Header.Get("Authorization")) { … 401 … }
//	if !tok.Matches(string(password)) { … WRONGPASS … }
//
// The caller's duties:
//  1. Treat a nil *Token as "no token configured": the methods need one.
//  2. Never log the secret, nor anything a client sent as one.
//
// A Token holds the secret's SHA-256, not the secret: Matches hashes what it is given and
// compares the two sums in constant time, so neither the length nor the content of a guess
// shows in how long the answer takes.
package apitoken
