package corral

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// FuzzCodec feeds a value's bytes, as a peer sends them, to the codecs a group may have by
// default: raw for []byte and string, JSON for everything else (here a struct, a map of
// anything, a slice and a pointer). Raw codecs give the bytes back unchanged; the JSON
// codec either refuses the bytes with an error or decodes a value that encodes and decodes
// to itself again, so a value that crossed the wire once crosses it again unchanged.
func FuzzCodec(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind byte, b []byte) {
		switch kind % 6 {
		case 0:
			rawRoundTrip[[]byte](t, b, func(v []byte) []byte { return v })
		case 1:
			rawRoundTrip[string](t, b, func(v string) []byte { return []byte(v) })
		case 2:
			jsonRoundTrip[fuzzValue](t, b)
		case 3:
			jsonRoundTrip[map[string]any](t, b)
		case 4:
			jsonRoundTrip[[]int64](t, b)
		case 5:
			jsonRoundTrip[*fuzzValue](t, b)
		}
	})
}

// fuzzValue is a struct value of a JSON group, as FuzzPeerHandler's JSON group holds.
type fuzzValue struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}

// rawRoundTrip checks that V's default codec takes any bytes and gives them back.
func rawRoundTrip[V any](t *testing.T, b []byte, raw func(V) []byte) {
	c := defaultCodec[V]()
	v, err := c.Decode(b)
	if err != nil {
		t.Fatalf("%T refused %q: %v", c, b, err)
	}
	if !bytes.Equal(raw(v), b) {
		t.Fatalf("%T decoded %q as %q", c, b, raw(v))
	}
	again, err := c.Encode(v)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("%T encoded %q as %q, %v", c, b, again, err)
	}
}

// jsonRoundTrip checks that V's default codec, JSON, refuses b or decodes a value that
// survives another trip.
func jsonRoundTrip[V any](t *testing.T, b []byte) {
	c := defaultCodec[V]()
	if _, ok := c.(JSONCodec[V]); !ok {
		t.Fatalf("the default codec of %T is %T, want JSONCodec", *new(V), c)
	}
	v, err := c.Decode(b)
	if err != nil {
		return
	}
	enc, err := c.Encode(v)
	if err != nil {
		t.Fatalf("%q decoded as %#v, which does not encode: %v", b, v, err)
	}
	again, err := c.Decode(enc)
	if err != nil || !reflect.DeepEqual(again, v) {
		t.Fatalf("%q decoded as %#v, encoded as %q, which decodes as %#v, %v", b, v, enc, again, err)
	}
}

// codecSeeds are FuzzCodec's seed corpus.
func codecSeeds() []fuzzcorpus.Seed {
	var seeds []fuzzcorpus.Seed
	add := func(name string, kinds []byte, b string) {
		for _, k := range kinds {
			seeds = append(seeds, fuzzcorpus.Seed{Name: fmt.Sprintf("%s-%d", name, k), Values: []any{k, []byte(b)}})
		}
	}
	raw, structs, all := []byte{0, 1}, []byte{2, 5}, []byte{0, 1, 2, 3, 4, 5}
	add("html", raw, "<h1>42</h1>\n")
	add("binary", raw, "\x00\xff\xfe\x80 not utf-8")
	add("empty", all, "")
	add("struct", structs, `{"n":42,"s":"héllo \u2028"}`)
	add("struct-unknown-field", structs, `{"n":1,"extra":[1,2,{"x":null}]}`)
	add("struct-wrong-type", structs, `{"n":"42"}`)
	add("struct-overflow", structs, `{"n":1e400}`)
	add("null", all, "null")
	add("map", []byte{3}, `{"a":1.5,"b":[true,null,"x"],"c":{"d":-0},"e":1e308,"f":"\ud800"}`)
	add("map-duplicate-keys", []byte{3}, `{"a":1,"a":2}`)
	add("slice", []byte{4}, `[1,-9223372036854775808,9223372036854775807]`)
	add("slice-overflow", []byte{4}, `[9223372036854775808]`)
	add("deep", []byte{3, 4}, string(bytes.Repeat([]byte("["), 10001)))
	add("truncated", []byte{2, 3}, `{"n":`)
	add("invalid-utf8-string", []byte{2, 3}, "{\"s\":\"\xff\xfe\"}")
	return seeds
}
