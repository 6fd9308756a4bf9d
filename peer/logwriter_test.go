package peer

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLogWriter(t *testing.T) {
	var buf bytes.Buffer
	l := newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level:       slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	})))
	l.Printf("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	l.Printf("[INFO] memberlist: Marking b as failed")
	l.Printf("[WARN] memberlist: Refuting a suspect message (from: a)")
	l.Printf("[ERR] memberlist: Push/Pull with b failed: EOF")
	l.Printf("[ERR] memberlist: Failed fallback TCP ping: dial tcp 10.1.0.7:7946: connect: connection refused")
	l.Printf("[ERR] memberlist: Failed to decode ping: bad")
	l.Printf("[ERROR] something else")
	l.Printf("no level at all")
	want := strings.Join([]string{
		`level=DEBUG msg="Stream connection from=127.0.0.1:1" component=memberlist`,
		`level=INFO msg="Marking b as failed" component=memberlist`,
		`level=WARN msg="Refuting a suspect message (from: a)" component=memberlist`,
		`level=WARN msg="Push/Pull with b failed: EOF" component=memberlist`,
		`level=WARN msg="Failed fallback TCP ping: dial tcp 10.1.0.7:7946: connect: connection refused" component=memberlist`,
		`level=ERROR msg="Failed to decode ping: bad" component=memberlist`,
		`level=ERROR msg="something else" component=memberlist`,
		`level=INFO msg="no level at all" component=memberlist`,
	}, "\n") + "\n"
	if got := buf.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	buf.Reset()
	quiet := newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	quiet.Printf("[DEBUG] memberlist: dropped")
	if buf.Len() != 0 {
		t.Errorf("a Debug line reached an Info logger: %q", buf.String())
	}
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
