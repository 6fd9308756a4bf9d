package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSecretsFlags(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key and CA", []string{"--tls-cert", "c"}, "go together"},
		{"CA alone", []string{"--tls-ca", "c"}, "go together"},
		{"verify switch without a key", []string{"--gossip-verify-incoming=false"}, "need --secret-key-file"},
		{"send plaintext, refuse it", []string{"--secret-key-file", "k", "--gossip-verify-outgoing=false"}, "needs --gossip-verify-incoming=false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs, c := serveFlags(io.Discard)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := c.validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate: %v, want %q", err, tt.want)
			}
		})
	}
}

// A running daemon applies a new key file (corral_gossip_keys counts the keyring), keeps its
// keys when the file goes bad (and says so once), and the watch ends with the node.
func TestKeyFileIsReadAgain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	old, fresh := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	write := func(s string) {
		t.Helper()
		// As the kubelet does: a new file renamed over the old.
		tmp := filepath.Join(dir, "key.tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(old + "\n")
	fs, c := serveFlags(io.Discard)
	if err := fs.Parse([]string{"--bind", "127.0.0.1", "--gossip-port", "0", "--peer-port", "0", "--drain", "0", "--secret-key-file", path}); err != nil {
		t.Fatal(err)
	}
	c.name = "test"
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	d, err := startDaemon(c, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.closeNode(context.Background())
	keys := func() string {
		mfs, err := d.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "corral_gossip_keys" {
				return strings.TrimSpace(mf.GetMetric()[0].GetGauge().String())
			}
		}
		return ""
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; log:\n%s", what, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if got := keys(); got != "value:1" {
		t.Fatalf("corral_gossip_keys %s at start", got)
	}

	write(old + "\n" + fresh + "\n")
	wait("two keys", func() bool { return keys() == "value:2" })
	write("not a key\n")
	wait("the bad file to be reported", func() bool { return strings.Contains(logs.String(), "could not be reloaded") })
	write("still not a key\n")
	wait("the second bad file to be reported", func() bool { return strings.Count(logs.String(), "could not be reloaded") == 2 })
	if got := keys(); got != "value:2" {
		t.Errorf("corral_gossip_keys %s after bad files, want the two keys kept", got)
	}
	write(fresh + "\n")
	wait("the new key alone", func() bool { return keys() == "value:1" })
	if n := strings.Count(logs.String(), "gossip keys reloaded"); n != 2 {
		t.Errorf("%d reloads logged, want 2:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), old) || strings.Contains(logs.String(), fresh) {
		t.Errorf("a key is in the log:\n%s", logs.String())
	}
}
