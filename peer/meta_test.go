package peer

import (
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	tests := []wireMeta{
		{},
		{Meta: Meta{PeerAddr: "10.0.0.7:7947", RingVersion: RingVersion, StartedAt: time.Unix(1700000000, 123456789)}},
		{Meta: Meta{PeerAddr: "[fd00::1%eth0]:7947", RingVersion: 1<<32 - 1, StartedAt: time.Unix(-5, 0)}, leaving: true},
		{Meta: Meta{PeerAddr: strings.Repeat("x", maxPeerAddrLen)}},
		{Meta: Meta{PeerAddr: "10.0.0.8:7947", PeerTLS: true}, leaving: true},
	}
	for _, w := range tests {
		b := w.encode()
		if len(b) > memberlist.MetaMaxSize {
			t.Errorf("%+v encodes to %d bytes, over memberlist's %d", w, len(b), memberlist.MetaMaxSize)
		}
		got, err := decodeMeta(b)
		if err != nil {
			t.Errorf("decode(encode(%+v)): %v", w, err)
			continue
		}
		if got.PeerAddr != w.PeerAddr || got.RingVersion != w.RingVersion || !got.StartedAt.Equal(w.StartedAt) ||
			got.StartedAt.IsZero() != w.StartedAt.IsZero() || got.leaving != w.leaving {
			t.Errorf("decode(encode(%+v)) = %+v", w, got)
		}
	}
}

func TestMetaRoundTripQuick(t *testing.T) {
	f := func(addr string, rv uint32, nanos int64, leaving bool) bool {
		if len(addr) > maxPeerAddrLen {
			addr = addr[:maxPeerAddrLen]
		}
		w := wireMeta{Meta: Meta{PeerAddr: addr, RingVersion: rv, StartedAt: time.Unix(0, nanos)}, leaving: leaving}
		got, err := decodeMeta(w.encode())
		return err == nil && got.PeerAddr == addr && got.RingVersion == rv && got.leaving == leaving &&
			(nanos == 0 && got.StartedAt.IsZero() || got.StartedAt.Equal(w.StartedAt))
	}
	if err := quick.Check(f, nil); err != nil {
		t.Error(err)
	}
}

func TestDecodeMetaRefusesGarbage(t *testing.T) {
	good := wireMeta{Meta: Meta{PeerAddr: "10.0.0.7:7947", RingVersion: 1, StartedAt: time.Unix(1, 0)}}.encode()
	tests := map[string][]byte{
		"nil":          nil,
		"one byte":     {metaFormat},
		"other format": append([]byte{2}, good[1:]...),
		"bad varint":   {metaFormat, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"huge version": {metaFormat, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0},
		"addr too long for buffer": func() []byte {
			b := wireMeta{Meta: Meta{PeerAddr: "10.0.0.7:7947"}}.encode()
			return b[:len(b)-1]
		}(),
	}
	for i := range len(good) {
		tests["truncated to "+string(rune('0'+i))] = good[:i]
	}
	for name, b := range tests {
		if w, err := decodeMeta(b); err == nil {
			t.Errorf("%s: decoded %+v", name, w)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(wireMeta{Meta: Meta{PeerAddr: "10.0.0.7:7947", RingVersion: 1, StartedAt: time.Unix(1, 0)}, leaving: true}.encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeMeta(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to a prefix of the input (trailing bytes are ignored).
		again, err := decodeMeta(w.encode())
		if err != nil || again.PeerAddr != w.PeerAddr || again.RingVersion != w.RingVersion || again.leaving != w.leaving {
			t.Errorf("%x decodes to %+v, which does not round-trip: %+v, %v", b, w, again, err)
		}
	})
}
