package resp

import (
	"bufio"
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// What the loop takes as a command is what the connection's reader would have read there:
// the same arguments, from exactly the bytes the loop says it used.
func FuzzParseCommand(f *testing.F) {
	lim := requestLimits{command: commandBytes(1 << 20), args: maxArgs, inline: maxInlineBytes, step: bulkStep}
	f.Fuzz(func(t *testing.T, in []byte) {
		args, used := parseCommand(in, nil)
		if used == 0 {
			return // the reader's to read
		}
		if used > len(in) || len(args) == 0 || len(args) > maxLoopArgs {
			t.Fatalf("parseCommand(%q) = %q, %d bytes", in, args, used)
		}
		rr := newReader(bufio.NewReader(bytes.NewReader(in[:used])), lim, nil)
		want, err := rr.command()
		if err != nil {
			t.Fatalf("parseCommand took %q as %q; the reader: %v", in[:used], args, err)
		}
		if !slices.EqualFunc(args, want, bytes.Equal) {
			t.Fatalf("parseCommand took %q as %q; the reader as %q", in[:used], args, want)
		}
		rr.done()
		if more, err := rr.command(); err != io.EOF {
			t.Fatalf("parseCommand used %q; the reader read %q more from it (%v)", in[:used], more, err)
		}
	})
}

// loopSeeds are FuzzParseCommand's seeds.
func loopSeeds() []fuzzcorpus.Seed {
	seed := func(name, in string) fuzzcorpus.Seed { return fuzzcorpus.Seed{Name: name, Values: []any{[]byte(in)}} }
	return []fuzzcorpus.Seed{
		seed("get", command("GET", "k")),
		seed("go-redis-get", "*2\r\n$3\r\nget\r\n$7\r\nuser:42\r\n"),
		seed("two-gets", command("GET", "k")+command("GET", "j")),
		seed("set", command("SET", "k", "v")),
		seed("cut-short", "*2\r\n$3\r\nGET\r\n$1\r\nk"),
		seed("leading-zero", "*2\r\n$3\r\nGET\r\n$01\r\nk\r\n"),
		seed("empty-name", "*1\r\n$0\r\n\r\n"),
		seed("inline", "GET k\r\n"),
		seed("four-args", "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
		seed("negative-length", "*2\r\n$3\r\nGET\r\n$-1\r\n"),
		seed("length-lies", "*2\r\n$3\r\nGET\r\n$2\r\nk\r\r\n"),
	}
}
