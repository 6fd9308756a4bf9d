package write

import (
	"context"
	"errors"

	"github.com/corralcache/corral/transport"
	"github.com/corralcache/corral/transport/peerpb"
)

// Group is what reconciliation needs of a group, whatever its value type.
type Group interface {
	Name() string
	// Writes returns the group's remembered writes (its tombstones), for the wire.
	Writes() []*peerpb.Write
	// Invalidate applies a write of key at version made elsewhere (see Writer.Apply).
	Invalidate(key string, version uint64)
}

// Exchange sends every group's remembered writes, and the node's remembered tag purges, to
// the member at addr and applies the ones it answers with: one call per group, each bounded
// by Config.PeerTimeout. A member that does not have a group holds nothing of it.
func (w *Writer) Exchange(ctx context.Context, addr string, groups []Group) error {
	for _, g := range groups {
		ctx, cancel := context.WithTimeout(ctx, w.cfg.PeerTimeout)
		resp, err := w.cfg.Client.Reconcile(ctx, addr, &peerpb.ReconcileRequest{
			Header: w.cfg.Router.Header(context.Background()), Group: g.Name(), Writes: g.Writes(),
			Purges: w.purges(),
		})
		cancel()
		if errors.Is(err, transport.ErrUnknownGroup) {
			continue // it holds nothing of this group
		}
		if err != nil {
			return err
		}
		w.Apply(g, resp.GetWrites())
		w.ApplyPurges(resp.GetPurges())
	}
	return nil
}

// Apply applies writes another member remembers, as if it had told this node of each.
func (w *Writer) Apply(g Group, ws []*peerpb.Write) {
	for _, wr := range ws {
		w.cfg.Clock.Observe(wr.GetVersion())
		g.Invalidate(string(wr.GetKey()), wr.GetVersion())
	}
}
