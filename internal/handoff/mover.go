package handoff

import (
	"github.com/corralcache/corral/fill"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/corralcache/corral/internal/route"
	"github.com/corralcache/corral/internal/version"
	"github.com/corralcache/corral/internal/view"
	"github.com/corralcache/corral/transport"
)

// Config is what a Mover moves entries with. Every field is required; the pointers are the
// node's.
type Config struct {
	View   *atomic.Pointer[view.View] // this node's current view
	Router *route.Router
	Client *transport.Client
	Clock  *version.Clock
	Log    *slog.Logger
	// PeekWindow is how long after a membership change a new owner asks the previous owners;
	// negative = never. PeekTimeout bounds each question.
	PeekWindow, PeekTimeout time.Duration
	// AskedAt returns when another member first asked this node anything (zero if none has):
	// see view.View.PeekCandidates.
	AskedAt func() time.Time
	// Sent counts entries a receiver accepted from a hand-off (corral_handoff_keys_total).
	Sent func(n int)
	// Tags is the node's registry of tags and their purges: a copy of a value made before a
	// purge of one of its tags is not taken.
	Tags *fill.Tags
}

// Mover moves entries between this node and the other members.
type Mover struct{ cfg Config }

// New returns a Mover over cfg.
func New(cfg Config) *Mover { return &Mover{cfg: cfg} }

// Moved reports whether a warm pull of key would ask anyone: whether key moved to this node
// within PeekWindow (see view.View.PeekCandidates).
func (m *Mover) Moved(key string) bool {
	_, moved := m.cfg.View.Load().PeekCandidates(key, m.cfg.PeekWindow, time.Now(), m.cfg.AskedAt())
	return moved
}
