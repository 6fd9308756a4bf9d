// Package intern hands out strings of request bytes without allocating for bytes it has seen:
// the Redis protocol front's keys and the HTTP front's paths.
//
//	var keys intern.Strings
//	key := keys.Of(arg) // arg is reused by the next request; key may be kept
package intern
