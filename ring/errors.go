package ring

import "errors"

// ErrInvalidMember is returned by New when a member name is empty, contains
// a NUL byte, or appears twice. The returned error wraps it and names the
// offending member.
var ErrInvalidMember = errors.New("ring: invalid member")

// ErrInvalidConfig is returned by New when a Config field is out of range.
// The returned error wraps it and names the field.
var ErrInvalidConfig = errors.New("ring: invalid config")
