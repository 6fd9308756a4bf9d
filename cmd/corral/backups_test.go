package main

import (
	"io"
	"testing"
)

// --backups takes 0 to 2 (CORRAL_BACKUPS too: every flag is read from the environment).
func TestBackupsFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
		ok   bool
	}{
		{nil, 0, true},
		{[]string{"--backups", "1"}, 1, true},
		{[]string{"--backups", "2"}, 2, true},
		{[]string{"--backups", "3"}, 0, false},
		{[]string{"--backups", "-1"}, 0, false},
	} {
		fs, c := serveFlags(io.Discard)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err := c.validate()
		if (err == nil) != tt.ok {
			t.Fatalf("%v: validate = %v, want ok %v", tt.args, err, tt.ok)
		}
		if tt.ok && c.backups != tt.want {
			t.Fatalf("%v: %d backups, want %d", tt.args, c.backups, tt.want)
		}
	}
}
