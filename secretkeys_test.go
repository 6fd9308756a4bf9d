package corral_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralcache/corral"
)

func TestParseSecretKeys(t *testing.T) {
	k16, k24, k32 := "0123456789abcdef", "0123456789abcdef01234567", "0123456789abcdef0123456789abcdef"
	bin := []byte("\x00\n\xff\n0123456789abcdef0123456789ab") // 32 bytes, two of them newlines
	b64 := func(s string) string { return "base64:" + base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name string
		file string
		want []string // primary first; nil = an error
		err  string
	}{
		{"one raw key, as always", k32, []string{k32}, ""},
		{"one raw key and a newline", k16 + "\n", []string{k16}, ""},
		{"one raw key and CRLF", k24 + "\r\n", []string{k24}, ""},
		{"one binary key with newlines inside", string(bin), []string{string(bin)}, ""},
		{"a base64 key alone is base64", b64(k32) + "\n", []string{k32}, ""},
		{"a 16-byte base64 key alone is base64", b64(k16), []string{k16}, ""},
		{"two raw keys, first is primary", k32 + "\n" + k16 + "\n", []string{k32, k16}, ""},
		{"raw and base64 with CRLF", k24 + "\r\n" + b64(string(bin)) + "\r\n", []string{k24, string(bin)}, ""},
		{"three", b64(k16) + "\n" + k24 + "\n" + k32, []string{k16, k24, k32}, ""},
		{"empty", "\n", nil, "empty"},
		{"a wrong length", "short", nil, "line 1 is 5 bytes"},
		{"a wrong length in a list", k16 + "\n" + "0123456789", nil, "line 2 is 10 bytes"},
		{"an empty line", k16 + "\n\n" + k32, nil, "line 2 is empty"},
		{"a comment is not a key", "# keys\n" + k16, nil, "line 1 is 6 bytes"},
		{"bad base64", k16 + "\nbase64:!!!!", nil, "line 2: not base64"},
		{"base64 of a wrong length", k16 + "\n" + b64("0123456789"), nil, "the base64 key is 10 bytes"},
		{"a key twice", k16 + "\n" + b64(k16), nil, "lines 1 and 2 hold the same key"},
		{"too many", strings.Repeat(k16+"\n", 1) + b64(k24) + "\n" + b64("a123456789abcdef") + "\n" + b64("b123456789abcdef") + "\n" +
			b64("c123456789abcdef") + "\n" + b64("d123456789abcdef") + "\n" + b64("e123456789abcdef") + "\n" +
			b64("f123456789abcdef") + "\n" + b64("g123456789abcdef"), nil, "9 keys; at most 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			primary, secondary, err := corral.ParseSecretKeys([]byte(tt.file))
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one about %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "0123456789") {
					t.Errorf("the error shows key bytes: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := append([][]byte{primary}, secondary...)
			if len(got) != len(tt.want) {
				t.Fatalf("%d keys, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !bytes.Equal(got[i], []byte(tt.want[i])) {
					t.Errorf("key %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// A key file that is the key of a one-key file plus another line names that same key: the
// old key can be copied into the list of a rotation as it is.
func TestParseSecretKeysOneKeyFileGoesIntoAList(t *testing.T) {
	for _, old := range []string{"0123456789abcdef", "0123456789abcdef01234567", "0123456789abcdef0123456789abcdef"} {
		alone, _, err := corral.ParseSecretKeys([]byte(old + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		_, secondary, err := corral.ParseSecretKeys([]byte("ZYXWVUTSRQPONMLKJIHGFEDCBA987654\n" + old + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(alone, secondary[0]) {
			t.Errorf("%q alone is %q, in a list %q", old, alone, secondary[0])
		}
	}
}

// SetSecretKeys rotates a running node's keyring, which corral_gossip_keys counts; it refuses
// a plaintext node, bad keys, and a closed node.
func TestSetSecretKeys(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := testConfig("n0")
	cfg.SecretKey, cfg.SecondaryKeys, cfg.Registerer = gossipKey, [][]byte{[]byte("fedcba9876543210")}, reg
	n := newNode(t, cfg)
	if got := gossipKeys(t, reg); got != 2 {
		t.Errorf("corral_gossip_keys %v at start, want 2", got)
	}
	if err := n.SetSecretKeys([]byte("fedcba9876543210")); err != nil {
		t.Fatal(err)
	}
	if got := gossipKeys(t, reg); got != 1 {
		t.Errorf("corral_gossip_keys %v after SetSecretKeys of one key, want 1", got)
	}
	if err := n.SetSecretKeys([]byte("short")); err == nil {
		t.Error("SetSecretKeys accepted a 5-byte key")
	}
	plain := newNode(t, testConfig("n1"))
	if err := plain.SetSecretKeys(gossipKey); err == nil {
		t.Error("SetSecretKeys turned encryption on in a running plaintext node")
	}
	n.Close(context.Background())
	if err := n.SetSecretKeys(gossipKey); !errors.Is(err, corral.ErrClosed) {
		t.Errorf("SetSecretKeys after Close: %v, want ErrClosed", err)
	}
}

func gossipKeys(tb testing.TB, reg *prometheus.Registry) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "corral_gossip_keys" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
