package corral

import (
	"errors"
	"fmt"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/internal/group"
	"github.com/corralcache/corral/internal/lease"
	"github.com/corralcache/corral/internal/limit"
	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/internal/write"
)

// ErrNotFound is what a loader returns when the key does not exist at the source. It crosses
// the wire as itself: a Get on any node whose owner's loader returned it gets an error for
// which errors.Is(err, ErrNotFound) holds.
var ErrNotFound = fill.ErrNotFound

// ErrFillCycle is returned by Get when a loader asks, directly or through other groups and
// peers, for a key whose fill it is part of. Waiting would deadlock; corral fails at once.
var ErrFillCycle = fill.ErrFillCycle

// ErrPeerTimeout is the Err of a *FillError when a Get asked the key's owner (and the members
// it failed over to) and got no answer within the group's fill timeout plus
// Config.PeerTimeout: the time went to peers, not to the loader. errors.Is finds it.
var ErrPeerTimeout = group.ErrPeerTimeout

// ErrClosed is returned by calls on a Node, or its groups, after Close began: writes and
// leases at once; Gets once the node has handed its entries off (until Close returns they
// are asked of the other members instead, since no write reaches this node's copies any
// more), and every call after Close returned or the node was killed.
var ErrClosed = view.ErrClosed

// ErrLeaseArgument is wrapped by the errors of Lease and FillSet for arguments out of range
// (a Fill outside [MinLeaseFill, MaxLeaseFill], a Wait above MaxLeaseWait, an empty token,
// a negative TTL or SWR).
var ErrLeaseArgument = lease.ErrArgument

// ErrTooManyLeases is wrapped by the error of Lease when the key's owner already holds, in
// the key's group, as many leases as it may at once (65,536): the request is sound, the
// owner is full. Nothing changed; a later call succeeds once leases end (stored, lapsed or
// revoked). corral serve answers it with 503 and -BUSY.
var ErrTooManyLeases = lease.ErrTooMany

// ErrInvalidTag is wrapped by the error for tags that break a limit or are not well formed:
// a tag is 1 to 256 bytes without spaces or control characters (so it crosses an HTTP
// Surrogate-Key header and the Redis protocol unchanged), a value carries at most 32 tags of
// at most 2 KiB together. Set and RemoveByTag return it and change nothing; a loader that tags
// its value so fails its fill: every caller gets a *FillError saying which limit (on the
// key's owner, wrapping ErrInvalidTag; elsewhere, with the owner's message).
var ErrInvalidTag = fill.ErrInvalidTag

// FillError is the error of every caller of a fill that failed. Check it with errors.As:
//
//	var fe *corral.FillError
//	if errors.As(err, &fe) && fe.Remote { … }
//
// The caller whose Get ran the loader in this process has Shared == false and
// errors.Is(err, loaderErr); callers that waited on it have Shared == true; callers on other
// nodes have Remote == true and an Err carrying the loader's message (ErrNotFound and
// ErrFillCycle stay themselves). A loader panic is reported the same way, its Err a
// *fill.PanicError locally.
type FillError struct {
	Group, Key string
	Err        error
	Shared     bool // waited on a fill (or owner request) another Get started
	Remote     bool // the fill ran on another node
}

func (e *FillError) Error() string {
	where := ""
	if e.Remote {
		where = " (on the owner)"
	}
	return fmt.Sprintf("corral: fill %s/%q%s: %v", e.Group, e.Key, where, e.Err)
}

func (e *FillError) Unwrap() error { return e.Err }

// LimitError reports input that breaks one of corral's limits: it names the limit.
type LimitError struct {
	Limit string // "key", "value", "group name"
	Size  int    // the offending size in bytes
	Max   int    // the limit in bytes
}

func (e *LimitError) Error() string { return (*limit.Error)(e).Error() }

// UnreachedError is returned by Remove and Set when the owner applied the write but some
// members could not be told of it (crashed and not yet detected, partitioned away): those
// may serve the old value until their copies expire. Every other member was told, and the
// write stands.
type UnreachedError struct {
	Members []string // sorted
	Err     error
}

func (e *UnreachedError) Error() string { return (*write.UnreachedError)(e).Error() }

func (e *UnreachedError) Unwrap() error { return e.Err }

// publicErr turns the errors of the packages below into the public ones: the same messages,
// as the types this package documents. (Its sentinels are theirs.)
func publicErr(err error) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *fill.FillError:
		out := &FillError{Group: e.Name, Key: e.Key, Err: e.Err, Shared: e.Shared}
		var re *route.RemoteError
		if errors.As(out.Err, &re) {
			out.Err, out.Remote = re.Err, true
		}
		return out
	case *limit.Error:
		return (*LimitError)(e)
	case *write.UnreachedError:
		return (*UnreachedError)(e)
	}
	return err
}
