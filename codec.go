package corral

import (
	"encoding/json"
	"fmt"
	"unsafe"
)

// Codec turns a group's values into bytes for the wire and back. Owners and near caches keep
// decoded values, so a local hit never decodes. Implementations must be safe for concurrent
// use.
type Codec[V any] interface {
	Encode(v V) ([]byte, error)
	Decode(b []byte) (V, error)
}

// defaultCodec is raw for []byte and string, JSON otherwise.
func defaultCodec[V any]() Codec[V] {
	var zero V
	switch any(zero).(type) {
	case []byte:
		return any(bytesCodec{}).(Codec[V])
	case string:
		return any(stringCodec{}).(Codec[V])
	}
	return JSONCodec[V]{}
}

type bytesCodec struct{}

func (bytesCodec) Encode(v []byte) ([]byte, error) { return v, nil }
func (bytesCodec) Decode(b []byte) ([]byte, error) { return b, nil }

type stringCodec struct{}

func (stringCodec) Encode(v string) ([]byte, error) { return []byte(v), nil }
func (stringCodec) Decode(b []byte) (string, error) { return string(b), nil }

// JSONCodec encodes values with encoding/json; it is the default for types other than
// []byte and string.
type JSONCodec[V any] struct{}

var _ Codec[int] = JSONCodec[int]{}

func (JSONCodec[V]) Encode(v V) ([]byte, error) { return json.Marshal(v) }

func (JSONCodec[V]) Decode(b []byte) (V, error) {
	var v V
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("decode: %w", err)
	}
	return v, nil
}

// DecodeOwned is Decode of bytes given for good — a value off the wire, in a buffer of its
// own that nothing writes or keeps but the string made over it — without a copy.
func (stringCodec) DecodeOwned(b []byte) (string, error) {
	if len(b) == 0 {
		return "", nil
	}
	return unsafe.String(&b[0], len(b)), nil
}
