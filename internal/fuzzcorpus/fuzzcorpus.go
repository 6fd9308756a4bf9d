// Package fuzzcorpus keeps the seed corpora of corral's fuzz targets in code and on disk at
// once.
//
// A package lists the seeds of each of its fuzz targets in a table, each with a name that
// says what it is (a realistic message, a hostile one, the input of a crash found once), and
// a test calls Check for each target. Check fails when testdata/fuzz/<FuzzName>/<seed> does
// not hold the seed in the `go test fuzz v1` format; run the test with -fuzzcorpus.update to
// write the files. The files are what `go test` runs as ordinary tests and what `go test
// -fuzz` starts from; the table is where a reader sees why each one is there.
//
// Files under testdata/fuzz/<FuzzName>/ that no seed names — inputs the fuzzer wrote there
// when it found a failure, kept as regressions under their hash names — are left alone.
//
// # Usage
//
//	func TestFuzzCorpus(t *testing.T) {
//		fuzzcorpus.Check(t, "FuzzParseSeed", []fuzzcorpus.Seed{
//			{Name: "host-port", Values: []any{"10.0.0.7:7946"}},
//		})
//	}
//
//	go test -run '^TestFuzzCorpus$' ./peer -fuzzcorpus.update
package fuzzcorpus

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("fuzzcorpus.update", false, "write the seed corpora under testdata/fuzz instead of checking them")

// Seed is one input of a fuzz target.
type Seed struct {
	Name   string // file name under testdata/fuzz/<FuzzName>/: what the input is
	Values []any  // the fuzz function's arguments after *testing.T, in order, of their exact types
}

// Check fails t unless every seed is in testdata/fuzz/<target>/ as Marshal writes it (or,
// with -fuzzcorpus.update, writes them).
func Check(t *testing.T, target string, seeds []Seed) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	seen := map[string]bool{}
	for _, s := range seeds {
		if seen[s.Name] || s.Name == "" || filepath.Base(s.Name) != s.Name {
			t.Fatalf("%s: seed name %q is empty, repeated or not a plain file name", target, s.Name)
		}
		seen[s.Name] = true
		want := Marshal(s.Values...)
		path := filepath.Join(dir, s.Name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is missing or differs from its seed in code (run the test with -fuzzcorpus.update): %v", path, err)
		}
	}
}

// Marshal encodes vals in the corpus file format of `go test -fuzz` (version 1), as the go
// command writes it. It supports the types corral's fuzz targets take.
func Marshal(vals ...any) []byte {
	b := bytes.NewBufferString("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case string:
			fmt.Fprintf(b, "string(%q)\n", v)
		case []byte:
			fmt.Fprintf(b, "[]byte(%q)\n", v)
		case byte:
			fmt.Fprintf(b, "byte(%q)\n", v)
		case int, int8, int16, int64, uint, uint16, uint32, uint64, bool:
			fmt.Fprintf(b, "%T(%v)\n", v, v)
		default:
			panic(fmt.Sprintf("fuzzcorpus: unsupported type %T", v))
		}
	}
	return b.Bytes()
}
