package httpapi

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// FuzzParseWait feeds a lease parameter (?lease=, ?wait=, ?ttl=, ?swr=) to parseWait. A
// number is that many milliseconds, exactly, or an error when negative or past the range of
// a Duration; anything else is a Go duration, refused when negative. Nothing it accepts is
// negative.
func FuzzParseWait(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseWait("wait", s)
		if err == nil && d < 0 {
			t.Fatalf("parseWait(%q) = %v", s, d)
		}
		if ms, perr := strconv.ParseInt(s, 10, 64); perr == nil {
			inRange := ms >= 0 && ms <= math.MaxInt64/int64(time.Millisecond)
			switch {
			case inRange && (err != nil || d != time.Duration(ms)*time.Millisecond || int64(d/time.Millisecond) != ms):
				t.Fatalf("parseWait(%q) = %v, %v; want %d ms", s, d, err, ms)
			case !inRange && err == nil:
				t.Fatalf("parseWait(%q) = %v, want an error", s, d)
			}
			return
		}
		want, perr := time.ParseDuration(s)
		switch {
		case perr == nil && want >= 0 && (err != nil || d != want):
			t.Fatalf("parseWait(%q) = %v, %v; want %v", s, d, err, want)
		case (perr != nil || want < 0) && err == nil:
			t.Fatalf("parseWait(%q) = %v, want an error", s, d)
		}
	})
}

// waitSeeds are FuzzParseWait's seed corpus.
func waitSeeds() []fuzzcorpus.Seed {
	var seeds []fuzzcorpus.Seed
	for name, s := range map[string]string{
		"duration":     "5s",
		"fraction":     "1.5m",
		"compound":     "1h2m3.5s",
		"micros":       "200µs",
		"ms":           "5000",
		"zero":         "0",
		"empty":        "",
		"negative":     "-1s",
		"negative-ms":  "-5",
		"plus":         "+5",
		"ms-overflow":  "9223372036855",
		"int-overflow": "9223372036854775808",
		"dur-overflow": "2562048h",
		"no-unit":      "1.5",
		"garbage":      "soon",
		"spaces":       " 5s",
		"hex":          "0x10",
	} {
		seeds = append(seeds, fuzzcorpus.Seed{Name: name, Values: []any{s}})
	}
	return seeds
}
