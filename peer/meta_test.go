package peer

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/corralcache/corral/internal/fuzzcorpus"
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
		// Whatever decodes re-encodes to meta that decodes the same (the bytes may differ:
		// trailing bytes and unknown flags are ignored, a varint may be longer than needed).
		again, err := decodeMeta(w.encode())
		if err != nil || again.PeerAddr != w.PeerAddr || again.RingVersion != w.RingVersion || again.leaving != w.leaving ||
			again.PeerTLS != w.PeerTLS || !again.StartedAt.Equal(w.StartedAt) || again.StartedAt.IsZero() != w.StartedAt.IsZero() {
			t.Errorf("%x decodes to %+v, which does not round-trip: %+v, %v", b, w, again, err)
		}
		if len(w.PeerAddr) > maxPeerAddrLen {
			t.Errorf("%x decodes to a peer address of %d bytes", b, len(w.PeerAddr))
		}
	})
}

// metaSeeds are FuzzDecodeMeta's seed corpus: meta as members publish it, and what a
// member of another build, a corrupted packet or a hostile sender could put there.
func metaSeeds() []fuzzcorpus.Seed {
	seed := func(name string, b []byte) fuzzcorpus.Seed { return fuzzcorpus.Seed{Name: name, Values: []any{b}} }
	started := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)
	meta := func(addr string, tls, leaving bool) []byte {
		return wireMeta{Meta: Meta{PeerAddr: addr, RingVersion: RingVersion, PeerTLS: tls, StartedAt: started}, leaving: leaving}.encode()
	}
	good := meta("10.0.0.7:7947", false, false)
	return []fuzzcorpus.Seed{
		seed("member", good),
		seed("member-ipv6-zone", meta("[fe80::1%eth0]:7947", false, false)),
		seed("member-tls", meta("10.0.0.7:7947", true, false)),
		seed("member-leaving", meta("10.0.0.7:7947", false, true)),
		seed("watcher", wireMeta{Meta: Meta{RingVersion: RingVersion}}.encode()),
		seed("unknown-flags", append([]byte{metaFormat, 0xfc}, good[2:]...)),
		seed("later-fields", append(bytes.Clone(good), 0x01, 0x02, 0x03)),
		seed("other-format", append([]byte{2}, good[1:]...)),
		seed("long-varint", []byte{metaFormat, 0, 0x82, 0x80, 0x80, 0x80, 0x00, 0, 0}),
		seed("ring-version-overflow", []byte{metaFormat, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0}),
		seed("start-min", wireMeta{Meta: Meta{StartedAt: time.Unix(0, math.MinInt64)}}.encode()),
		seed("addr-too-long", append([]byte{metaFormat, 0, 2, 0, 0x80, 0x02}, bytes.Repeat([]byte("x"), 256)...)),
		seed("addr-past-end", append([]byte{metaFormat, 0, 2, 0, 20}, "10.0.0.7:7947"...)),
		seed("truncated", good[:len(good)/2]),
		seed("one-byte", []byte{metaFormat}),
		seed("empty", []byte{}),
	}
}
