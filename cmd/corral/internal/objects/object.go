package objects

import (
	"encoding/binary"
	"errors"

	"github.com/corralcache/corral"
)

// Object is what corral serve caches: a body and its Content-Type, as the origin or a PUT
// gave them.
type Object struct {
	Body []byte
	Type string
}

// MaxTypeBytes bounds an object's Content-Type (a PUT's longer one gets 400, an origin's
// fails the fill): media types are a few dozen bytes, and the bound lets the node's value
// limit be --max-value-bytes plus this framing, so that the limit counts the user's bytes.
const MaxTypeBytes = 1024

// Overhead is what Codec adds to a body at most.
const Overhead = binary.MaxVarintLen64 + MaxTypeBytes

// Codec puts an object on the wire as uvarint(len(Type)) Type Body: no copying of the body
// into another encoding, and no JSON.
type Codec struct{}

var _ corral.Codec[Object] = Codec{}

// Encode never fails.
func (Codec) Encode(o Object) ([]byte, error) {
	b := make([]byte, 0, binary.MaxVarintLen64+len(o.Type)+len(o.Body))
	b = binary.AppendUvarint(b, uint64(len(o.Type)))
	b = append(b, o.Type...)
	return append(b, o.Body...), nil
}

// EncodedSize is the length of Encode's bytes for o: a write applied on the key's owner checks
// the value limit with it and encodes nothing.
func (Codec) EncodedSize(o Object) int {
	return uvarintLen(uint64(len(o.Type))) + len(o.Type) + len(o.Body)
}

// uvarintLen is the length of binary.AppendUvarint's bytes for x.
func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// Decode refuses bytes whose Type would run past their end. The Body it returns is part of b.
func (Codec) Decode(b []byte) (Object, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return Object{}, errors.New("malformed object")
	}
	return Object{Type: string(b[k : k+int(n)]), Body: b[k+int(n):]}, nil
}
