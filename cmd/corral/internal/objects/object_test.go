package objects

import (
	"strings"
	"testing"
)

func TestObjectCodec(t *testing.T) {
	for _, o := range []Object{{}, {Body: []byte("x")}, {Body: []byte("\x00\xff"), Type: "application/json"}} {
		b, _ := Codec{}.Encode(o)
		got, err := Codec{}.Decode(b)
		if err != nil || string(got.Body) != string(o.Body) || got.Type != o.Type {
			t.Fatalf("round trip of %+v = %+v, %v", o, got, err)
		}
	}
	if _, err := (Codec{}).Decode([]byte{0x05, 'a'}); err == nil {
		t.Fatal("a truncated object decoded")
	}
}

// EncodedSize is the length of Encode's bytes, across the lengths where the Type's length
// takes one more byte.
func TestEncodedSize(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 1024, 16383, 16384} {
		o := Object{Type: strings.Repeat("t", n), Body: []byte("body")}
		b, _ := Codec{}.Encode(o)
		if got := (Codec{}).EncodedSize(o); got != len(b) {
			t.Errorf("a Type of %d bytes: EncodedSize = %d, Encode made %d", n, got, len(b))
		}
	}
}
