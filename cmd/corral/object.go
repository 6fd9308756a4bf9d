package main

import (
	"encoding/binary"
	"errors"
)

// object is what corral serve caches: a body and its Content-Type, as the origin or a PUT
// gave them.
type object struct {
	Body []byte
	Type string
}

// maxTypeBytes bounds an object's Content-Type (a PUT's longer one gets 400, an origin's
// fails the fill): media types are a few dozen bytes, and the bound lets the node's value
// limit be --max-value-bytes plus this framing, so that the limit counts the user's bytes.
const maxTypeBytes = 1024

// objectOverhead is what the codec adds to a body at most.
const objectOverhead = binary.MaxVarintLen64 + maxTypeBytes

// objectCodec puts an object on the wire as uvarint(len(Type)) Type Body: no copying of
// the body into another encoding, and no JSON.
type objectCodec struct{}

func (objectCodec) Encode(o object) ([]byte, error) {
	b := make([]byte, 0, binary.MaxVarintLen64+len(o.Type)+len(o.Body))
	b = binary.AppendUvarint(b, uint64(len(o.Type)))
	b = append(b, o.Type...)
	return append(b, o.Body...), nil
}

func (objectCodec) Decode(b []byte) (object, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return object{}, errors.New("malformed object")
	}
	return object{Type: string(b[k : k+int(n)]), Body: b[k+int(n):]}, nil
}
