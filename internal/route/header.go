package route

import (
	"context"

	"github.com/corralcache/corral/fill"
	"github.com/corralcache/corral/transport/peerpb"
)

// Header is the request header: this node, its ring epoch, its clock and the fill chain of
// ctx.
func (r *Router) Header(ctx context.Context) *peerpb.Header { return r.HeaderWith(fill.Chain(ctx)) }

// HeaderWith is Header with the fill chain given.
func (r *Router) HeaderWith(chain []string) *peerpb.Header {
	v := r.cfg.View.Load()
	h := &peerpb.Header{Sender: v.Self, Epoch: v.Ring.Epoch(), Clock: r.cfg.Clock.Now(), SenderAddr: r.cfg.PeerAddr,
		Leaving: r.cfg.Leaving.Load(), Started: r.cfg.Started.UnixNano()}
	for _, link := range chain {
		h.Chain = append(h.Chain, []byte(link))
	}
	return h
}
