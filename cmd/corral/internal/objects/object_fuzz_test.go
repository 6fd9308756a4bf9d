package objects

import (
	"bytes"
	"testing"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// FuzzObjectCodec feeds an object's bytes, as a peer sends them, to Codec. It refuses
// them or decodes an object that encodes and decodes to itself, no larger than the bytes;
// and any object, split from the bytes, survives a trip, its encoding as long as EncodedSize
// says.
func FuzzObjectCodec(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, split uint16) {
		var c Codec
		if o, err := c.Decode(b); err == nil {
			if len(o.Type)+len(o.Body) > len(b) {
				t.Fatalf("%q decoded as %d+%d bytes", b, len(o.Type), len(o.Body))
			}
			enc, _ := c.Encode(o)
			again, err := c.Decode(enc)
			if err != nil || again.Type != o.Type || !bytes.Equal(again.Body, o.Body) {
				t.Fatalf("%q decoded as %+v, which does not survive a trip: %+v, %v", b, o, again, err)
			}
		}
		i := min(int(split), len(b))
		o := Object{Type: string(b[:i]), Body: b[i:]}
		enc, _ := c.Encode(o)
		again, err := c.Decode(enc)
		if err != nil || again.Type != o.Type || !bytes.Equal(again.Body, o.Body) {
			t.Fatalf("%+v does not survive a trip: %q, %+v, %v", o, enc, again, err)
		}
		if n := c.EncodedSize(o); n != len(enc) {
			t.Fatalf("EncodedSize(%+v) = %d, Encode made %d bytes", o, n, len(enc))
		}
	})
}

// objectSeeds are FuzzObjectCodec's seed corpus.
func objectSeeds() []fuzzcorpus.Seed {
	enc := func(typ, body string) []byte {
		b, _ := Codec{}.Encode(Object{Type: typ, Body: []byte(body)})
		return b
	}
	seed := func(name string, b []byte, split uint16) fuzzcorpus.Seed {
		return fuzzcorpus.Seed{Name: name, Values: []any{b, split}}
	}
	return []fuzzcorpus.Seed{
		seed("html", enc("text/html; charset=utf-8", "<h1>42</h1>"), 9),
		seed("no-type", enc("", "\x00\xff binary"), 0),
		seed("empty-body", enc("application/json", ""), 16),
		seed("empty", nil, 0),
		seed("type-past-end", []byte{0x20, 't', 'e', 'x', 't'}, 1),
		seed("long-varint", []byte{0x80, 0x80, 0x00, 'x'}, 2),
		seed("varint-overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'x'}, 3),
		seed("varint-max", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 0),
		seed("varint-cut", []byte{0x80}, 0),
	}
}
