package peer

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// logWriter turns memberlist's log lines, which it writes through a *log.Logger as
// "[LEVEL] memberlist: message", into slog records at the matching level, with the attribute
// component=memberlist. A line without a known prefix is logged at Info as it is.
//
// log.Logger calls Write once per line and serializes the calls; logWriter keeps nothing from p.
type logWriter struct {
	logger *slog.Logger
}

// newMemberlistLogger returns the *log.Logger to put in memberlist.Config.Logger.
func newMemberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(logWriter{logger: l}, "", 0)
}

// levelPrefixes are the prefixes memberlist v0.7.0 writes. [ERROR] appears in a few of its
// dependencies' lines.
var levelPrefixes = []struct {
	prefix []byte
	level  slog.Level
}{
	{[]byte("[DEBUG]"), slog.LevelDebug},
	{[]byte("[INFO]"), slog.LevelInfo},
	{[]byte("[WARN]"), slog.LevelWarn},
	{[]byte("[ERR]"), slog.LevelError},
	{[]byte("[ERROR]"), slog.LevelError},
}

var memberlistPrefix = []byte("memberlist: ")

// unreachable are the [ERR] lines memberlist writes when it cannot reach a member. A member
// that dies (a crashed pod, a node gone) makes every survivor write them until failure
// detection declares it dead, which memberlist says at Info ("Marking <name> as failed") and
// corral too ("corral: member failed", with the member's name): they are logged at Warn, as
// what failure detection is about to settle, not as errors of this member.
var unreachable = [][]byte{
	[]byte("Failed fallback TCP ping"), []byte("Push/Pull with "), []byte("Failed to send gossip to "),
	[]byte("Failed to send UDP ping"), []byte("Failed to send UDP compound ping"), []byte("Failed to send indirect UDP ping"),
}

func (w logWriter) Write(p []byte) (int, error) {
	n := len(p)
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, lp := range levelPrefixes {
		if bytes.HasPrefix(line, lp.prefix) {
			level = lp.level
			line = bytes.TrimSpace(line[len(lp.prefix):])
			break
		}
	}
	line = bytes.TrimPrefix(line, memberlistPrefix)
	if level == slog.LevelError {
		for _, u := range unreachable {
			if bytes.HasPrefix(line, u) {
				level = slog.LevelWarn
				break
			}
		}
	}
	// Most of memberlist's lines are Debug: check before building the record, so a quiet
	// logger costs a prefix comparison per line.
	if !w.logger.Enabled(context.Background(), level) {
		return n, nil
	}
	w.logger.Log(context.Background(), level, string(line), slog.String("component", "memberlist"))
	return n, nil
}
