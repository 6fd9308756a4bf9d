package sim

import (
	"context"
	"flag"
	"log/slog"
	"strings"
)

// simLog is the simulated nodes' log: it counts, per key, the requests that failed over to
// the key's next owner (each may cost a fill there, an exception the fill check allows) and
// puts them in the trace. memberlist's own debug logs are dropped unread.
type simLog struct {
	h          *history
	node       string
	memberlist bool
}

var _ slog.Handler = simLog{}

func (l simLog) Enabled(_ context.Context, level slog.Level) bool {
	if l.memberlist {
		return level >= slog.LevelWarn
	}
	return level >= slog.LevelDebug
}

var flagVerbose = flag.Bool("sim.verbose", false, "put corral's debug log in the traces")

func (l simLog) Handle(_ context.Context, r slog.Record) error {
	if *flagVerbose && r.Level < slog.LevelWarn || strings.HasPrefix(r.Message, "corral: reconcil") || strings.HasPrefix(r.Message, "corral: hand") {
		var b strings.Builder
		b.WriteString(strings.TrimPrefix(r.Message, "corral: "))
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
			return true
		})
		l.h.logf(l.node, "%s", b.String())
	}
	if !strings.HasPrefix(r.Message, "corral: owner") {
		return nil
	}
	var keys []string
	var owner string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "key":
			keys = append(keys, a.Value.String())
		case "keys":
			// A batch's: its keys, behind the number the log shows.
			if k, ok := a.Value.Any().(interface{ Keys() []string }); ok {
				keys = append(keys, k.Keys()...)
			}
		case "owner":
			owner = a.Value.String()
		}
		return true
	})
	if keys == nil {
		keys = []string{""}
	}
	l.h.mu.Lock()
	for _, key := range keys {
		l.h.failovers[key]++
		l.h.failoverAt[key] = append(l.h.failoverAt[key], l.h.now())
	}
	l.h.mu.Unlock()
	l.h.logf(l.node, "failover %s from %s: %s", strings.Join(keys, " "), owner, strings.TrimPrefix(r.Message, "corral: "))
	return nil
}

func (l simLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	for _, a := range attrs {
		if a.Key == "component" && a.Value.String() == "memberlist" {
			l.memberlist = true
		}
	}
	return l
}

func (l simLog) WithGroup(string) slog.Handler { return l }
