package corral

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// FuzzParseSecretKeys feeds a gossip key file's contents to ParseSecretKeys. It returns keys
// of 16, 24 or 32 bytes, no two alike and at most maxSecretKeys, the file itself when it is
// one key of those lengths without its line ends; or an error that quotes no line of the
// file long enough to be a key.
func FuzzParseSecretKeys(f *testing.F) {
	f.Fuzz(func(t *testing.T, file []byte) {
		primary, secondary, err := ParseSecretKeys(file)
		if err != nil {
			for line := range strings.SplitSeq(string(file), "\n") {
				if line = strings.TrimSuffix(line, "\r"); len(line) >= 16 && strings.Contains(err.Error(), line) {
					t.Fatalf("the error %q quotes a line of the file", err)
				}
			}
			return
		}
		keys := append([][]byte{primary}, secondary...)
		if len(keys) > maxSecretKeys {
			t.Fatalf("%q: %d keys", file, len(keys))
		}
		for i, k := range keys {
			if len(k) != 16 && len(k) != 24 && len(k) != 32 {
				t.Fatalf("%q: key %d is %d bytes", file, i, len(k))
			}
			for _, other := range keys[:i] {
				if bytes.Equal(k, other) {
					t.Fatalf("%q: key %d twice", file, i)
				}
			}
		}
		if one := bytes.TrimRight(file, "\r\n"); len(one) == 16 || len(one) == 24 || len(one) == 32 {
			if !bytes.Equal(primary, one) || len(secondary) != 0 {
				t.Fatalf("%q: a one-key file read as %q and %q", file, primary, secondary)
			}
		}
	})
}

// secretKeySeeds are FuzzParseSecretKeys's seed corpus.
func secretKeySeeds() []fuzzcorpus.Seed {
	k16, k32 := "0123456789abcdef", "0123456789abcdef0123456789abcdef"
	b64 := "base64:" + base64.StdEncoding.EncodeToString([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	seed := func(name, file string) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{[]byte(file)}}
	}
	return []fuzzcorpus.Seed{
		seed("one-key", k32),
		seed("one-key-newline", k16+"\n"),
		seed("one-key-crlf", k32+"\r\n"),
		seed("one-key-binary", "\n\x00\xff"+k16[3:]),
		seed("list", k32+"\n"+k16+"\n"),
		seed("list-crlf", k16+"\r\n"+b64+"\r\n"),
		seed("list-base64", b64+"\n"+k32),
		seed("base64-bad", "base64:!!!!\n"+k16),
		seed("base64-short", "base64:AAAA\n"+k16),
		seed("duplicate", k16+"\n"+k16),
		seed("too-many", strings.Join([]string{
			"a123456789abcdef", "b123456789abcdef", "c123456789abcdef", "d123456789abcdef", "e123456789abcdef",
			"f123456789abcdef", "g123456789abcdef", "h123456789abcdef", "i123456789abcdef"}, "\n")),
		seed("empty-line", k16+"\n\n"+k32),
		seed("wrong-length", k16+"x\n"+k16),
		seed("empty", ""),
	}
}
