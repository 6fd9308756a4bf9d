package main

import (
	"io"
	"testing"
	"time"
)

// --silent-peer-timeout defaults to the library's 300 ms, takes a negative value as "never
// probe", and refuses 0 (which the library would read as its default, not as the 0 asked for).
func TestSilentPeerTimeoutFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want time.Duration
		ok   bool
	}{
		{nil, 300 * time.Millisecond, true},
		{[]string{"--silent-peer-timeout", "2s"}, 2 * time.Second, true},
		{[]string{"--silent-peer-timeout", "-1s"}, -time.Second, true},
		{[]string{"--silent-peer-timeout", "0"}, 0, false},
	} {
		fs, c := serveFlags(io.Discard)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err := c.validate()
		if (err == nil) != tt.ok {
			t.Fatalf("%v: validate = %v, want ok %v", tt.args, err, tt.ok)
		}
		if tt.ok && c.silentPeerTimeout != tt.want {
			t.Fatalf("%v: %v, want %v", tt.args, c.silentPeerTimeout, tt.want)
		}
	}
}
