package objects

import "testing"

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
