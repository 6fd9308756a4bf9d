package main

import (
	"context"
	"sort"
	"strings"

	"github.com/corralcache/corral/cmd/corral/internal/debugui"
)

// hotKeysShown is how many of each group's hottest keys the page lists.
const hotKeysShown = 10

// debugState is the live page's view of the daemon (/debug/corral).
func (d *daemon) debugState() debugui.State {
	ready, _ := d.ready()
	st := debugui.State{Self: d.node.Name(), Epoch: d.node.Epoch(), Ready: ready, StartedAt: d.started}
	shares := d.node.Shares()
	for _, m := range d.node.Members() {
		status := "alive"
		if m.Name == st.Self && !ready && d.stopping.Load() {
			status = "leaving"
		}
		st.Members = append(st.Members, debugui.Member{
			Name: m.Name, GossipAddr: m.GossipAddr, PeerAddr: m.PeerAddr,
			Share: shares[m.Name], Self: m.Name == st.Self, Status: status,
		})
	}
	groups := d.groups.All()
	for name, s := range d.node.Stats() {
		g := debugui.Group{
			Name: name, Gets: s.Gets, Fills: s.Fills, Coalesced: s.Coalesced, StaleServed: s.StaleServed,
			NearHits: s.NearHits, FillErrors: s.FillErrors, Entries: s.Entries, Bytes: s.Bytes,
		}
		if h, ok := groups[name]; ok {
			g.HotKeys = h.HotKeys(hotKeysShown)
			for _, k := range g.HotKeys {
				// Hot keys are this node's own: a peek is a store lookup, no request.
				if _, info, err := h.Peek(context.Background(), k); err == nil && len(info.Tags) > 0 {
					if g.HotTags == nil {
						g.HotTags = make(map[string][]string)
					}
					g.HotTags[k] = info.Tags
				}
				if bs := h.Backups(k); len(bs) > 0 {
					if g.HotBackups == nil {
						g.HotBackups = make(map[string][]string)
					}
					for _, b := range bs {
						g.HotBackups[k] = append(g.HotBackups[k], b.Name)
					}
				}
			}
		}
		if h, ok := groups[name]; ok && d.cfg.tracing.traceUIURL != "" {
			if f, ok := h.SlowestFill(); ok {
				g.SlowFill = &debugui.SlowFill{Key: f.Key, Millis: float64(f.Duration.Microseconds()) / 1000, TraceID: f.TraceID,
					TraceURL: strings.ReplaceAll(d.cfg.tracing.traceUIURL, "{trace_id}", f.TraceID)}
			}
		}
		st.Groups = append(st.Groups, g)
	}
	sort.Slice(st.Groups, func(i, j int) bool { return st.Groups[i].Name < st.Groups[j].Name })
	for _, r := range d.node.JoinRefusals() {
		st.JoinRefusals = append(st.JoinRefusals, debugui.JoinRefusal{Seed: r.Seed, Reason: r.Reason, Diagnosis: r.Diagnosis, At: r.At})
	}
	return st
}
