package batch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/cmd/corral/internal/clip"
	"github.com/corralcache/corral/cmd/corral/internal/objects"
	"github.com/corralcache/corral/cmd/corral/internal/origin"
	"github.com/corralcache/corral/fill"
)

// MaxKeys is the most keys one batch read may name, duplicates included: the library's bound
// on a GetMany.
const MaxKeys = corral.MaxGetManyKeys

// ErrRefused is wrapped by the error of a batch refused whole (see Check): nothing was read.
// A refusal of more than MaxKeys keys wraps corral.ErrTooManyKeys too.
var ErrRefused = errors.New("batch refused")

// Failure is a key whose read failed, with the error a Get of it alone would have had.
type Failure struct {
	Key string
	Err error
}

// Answer is what a batch read found. Each key asked for is in exactly one of Values, Missing
// and Failed.
type Answer struct {
	// Values holds the value of every key found.
	Values map[string]objects.Object
	// Missing lists the keys not found, each once, in the order first asked.
	Missing []string
	// Failed lists the keys whose read failed, each once, in the order first asked.
	Failed []Failure
}

// Check refuses a batch before anything is read: more than MaxKeys keys, a key that is empty or
// longer than fill.MaxKeyBytes, or, when o is not nil, a key that o cannot be asked for in
// group. Its error wraps ErrRefused and names the first key at fault by its place (from 1)
// and its first bytes.
func Check(keys []string, o *origin.Origin, group string) error {
	if len(keys) > MaxKeys {
		return fmt.Errorf("%w: %w: %d keys in one batch read exceed the limit of %d keys", ErrRefused, corral.ErrTooManyKeys, len(keys), MaxKeys)
	}
	for i, key := range keys {
		if fill.CheckKey(key) != nil {
			le := &corral.LimitError{Limit: "key", Size: len(key), Max: fill.MaxKeyBytes}
			return fmt.Errorf("%w: key %d of %d%s: %s", ErrRefused, i+1, len(keys), quoted(key), strings.TrimPrefix(le.Error(), "corral: "))
		}
		if o != nil {
			if err := o.Check(group, key); err != nil {
				return fmt.Errorf("%w: key %d of %d: %v", ErrRefused, i+1, len(keys), err)
			}
		}
	}
	return nil
}

// quoted is a key as an error names it: its first 64 bytes, quoted, after a space; nothing
// for an empty key, which the limit's message names.
func quoted(key string) string {
	if key == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", clip.String(key, 64))
}

// Read checks keys (Check) and reads them from g with one GetMany: each key as a Get of it
// would read it, the keys that miss here asked of their owners in one request per owner.
// Its error is the whole read's: Check's (wrapping ErrRefused), ctx.Err() when ctx ended
// first (the fills go on for other callers), or corral.ErrClosed once the node closes; a key
// that failed alone is in Failed.
func Read(ctx context.Context, g *corral.Group[objects.Object], o *origin.Origin, keys []string) (Answer, error) {
	if err := Check(keys, o, g.Name()); err != nil {
		return Answer{}, err
	}
	values, err := g.GetMany(ctx, keys)
	var me *corral.ManyError
	if err != nil && !errors.As(err, &me) {
		return Answer{}, err
	}
	a := Answer{Values: values}
	if len(values) == len(keys) {
		return a, nil // every key found, each once: nothing to list
	}
	listed := make(map[string]bool, len(keys)-len(values))
	for _, key := range keys {
		if _, found := values[key]; found || listed[key] {
			continue
		}
		listed[key] = true
		if me != nil {
			if kerr, failed := me.Errors[key]; failed {
				a.Failed = append(a.Failed, Failure{Key: key, Err: kerr})
				continue
			}
		}
		a.Missing = append(a.Missing, key)
	}
	return a, nil
}
