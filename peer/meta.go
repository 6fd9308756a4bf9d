package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"
)

// RingVersion is the version of the ownership rules this build computes. Members whose
// Meta.RingVersion differs are refused: two versions in one cluster could route the same key to
// two different owners, and the one-fill guarantee would silently break. Bump it whenever a change
// makes two builds disagree about a key's owner given the same member set, or about what a
// peer's message means.
//
// 2: versions became the write clock of the root package (they were wall-clock nanoseconds),
// and keys crossed the wire as bytes: a build of version 1 would store copies that a write
// made older.
const RingVersion uint32 = 2

// Meta is what a member publishes about itself to every other member.
//
// It travels in memberlist's node metadata, which is limited to 512 bytes; the encoding is compact
// (about 20 bytes plus PeerAddr), and PeerAddr is limited to maxPeerAddrLen bytes.
type Meta struct {
	// PeerAddr is the "ip:port" of the member's gRPC peer server. "" means the member serves no
	// peer requests (tools that only watch the cluster).
	PeerAddr string
	// RingVersion is the version of the ownership rules the member computes. Zero in a Config
	// means this build's RingVersion.
	RingVersion uint32
	// PeerTLS says that the member's peer port speaks mutual TLS: a member that does not is
	// never given keys by one that does, nor the other way round, since neither can reach
	// the other's port.
	PeerTLS bool
	// StartedAt is when the member's process started, for logs and the debug page. It travels
	// with nanosecond precision and without a location or monotonic reading, so compare with
	// Equal. The zero time stays zero.
	StartedAt time.Time
}

// maxPeerAddrLen bounds Meta.PeerAddr: the longest "[IPv6%zone]:port" is far below it, and it
// keeps the encoded meta well under memberlist's MetaMaxSize (512 bytes).
const maxPeerAddrLen = 255

// metaFormat is the first byte of encoded meta. A decoder refuses other formats, so a future
// change of layout is an explicit refusal rather than a silent misreading. Fields added at the end
// of format 1 are ignored by older decoders, which is how format 1 grows compatibly.
const metaFormat = 1

// metaFlagLeaving marks a member that has started a graceful Leave: when its departure arrives,
// peers report EventLeave rather than EventFail. memberlist itself reports both as NotifyLeave
// with nothing to tell them apart (see delegate.go).
const metaFlagLeaving = 1 << 0

// metaFlagPeerTLS marks a member whose peer port speaks mutual TLS (Meta.PeerTLS). Decoders
// before it ignore the bit, as they ignore every flag they do not know.
const metaFlagPeerTLS = 1 << 1

// wireMeta is Meta plus the flags that only this package reads.
type wireMeta struct {
	Meta
	leaving bool
}

// validate reports whether m can be published.
func (m Meta) validate() error {
	if len(m.PeerAddr) > maxPeerAddrLen {
		return fmt.Errorf("peer: Meta.PeerAddr is %d bytes, limit %d", len(m.PeerAddr), maxPeerAddrLen)
	}
	if m.PeerAddr != "" {
		if _, _, err := net.SplitHostPort(m.PeerAddr); err != nil {
			return fmt.Errorf("peer: Meta.PeerAddr %q: %w", m.PeerAddr, err)
		}
	}
	return nil
}

// encode lays out w as:
//
//	format byte | flags byte | uvarint RingVersion | varint StartedAt.UnixNano (0 = zero time) |
//	uvarint len(PeerAddr) | PeerAddr
func (w wireMeta) encode() []byte {
	buf := make([]byte, 0, 2+binary.MaxVarintLen32+binary.MaxVarintLen64+binary.MaxVarintLen16+len(w.PeerAddr))
	var flags byte
	if w.leaving {
		flags |= metaFlagLeaving
	}
	if w.PeerTLS {
		flags |= metaFlagPeerTLS
	}
	buf = append(buf, metaFormat, flags)
	buf = binary.AppendUvarint(buf, uint64(w.RingVersion))
	var nanos int64
	if !w.StartedAt.IsZero() {
		nanos = w.StartedAt.UnixNano()
	}
	buf = binary.AppendVarint(buf, nanos)
	buf = binary.AppendUvarint(buf, uint64(len(w.PeerAddr)))
	buf = append(buf, w.PeerAddr...)
	return buf
}

// errMetaFormat is wrapped by decodeMeta's errors.
var errMetaFormat = errors.New("undecodable member meta")

// decodeMeta is the inverse of encode. It never panics on any input: the bytes come from the
// network.
func decodeMeta(b []byte) (wireMeta, error) {
	var w wireMeta
	if len(b) < 2 {
		return w, fmt.Errorf("%w: %d bytes", errMetaFormat, len(b))
	}
	if b[0] != metaFormat {
		return w, fmt.Errorf("%w: format %d, want %d", errMetaFormat, b[0], metaFormat)
	}
	w.leaving = b[1]&metaFlagLeaving != 0
	w.PeerTLS = b[1]&metaFlagPeerTLS != 0
	b = b[2:]

	rv, n := binary.Uvarint(b)
	if n <= 0 || rv > 1<<32-1 {
		return w, fmt.Errorf("%w: bad ring version", errMetaFormat)
	}
	w.RingVersion = uint32(rv)
	b = b[n:]

	nanos, n := binary.Varint(b)
	if n <= 0 {
		return w, fmt.Errorf("%w: bad start time", errMetaFormat)
	}
	if nanos != 0 {
		w.StartedAt = time.Unix(0, nanos)
	}
	b = b[n:]

	l, n := binary.Uvarint(b)
	if n <= 0 || l > maxPeerAddrLen || l > uint64(len(b)-n) {
		return w, fmt.Errorf("%w: bad peer address", errMetaFormat)
	}
	w.PeerAddr = string(b[n : n+int(l)])
	return w, nil
}
