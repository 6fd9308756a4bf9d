package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The SBOM of corral's binary lists exactly the modules `go version -m` reports linked into
// it, each with its go.sum hash, and the binary's own SHA-256; it is the same bytes twice.
func TestGenerateMatchesGoVersionM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "corral")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/corralcache/corral/cmd/corral")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := Generate(bin, "0.1.0", "abc123", "1700000000")
	if err != nil {
		t.Fatal(err)
	}
	again, err := Generate(bin, "0.1.0", "abc123", "1700000000")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Fatal("two SBOMs of one binary differ")
	}

	var got bom
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if got.BOMFormat != "CycloneDX" || got.SpecVersion != "1.5" || !strings.HasPrefix(got.SerialNumber, "urn:uuid:") {
		t.Fatalf("header: %+v", got)
	}
	mc := got.Metadata.Component
	if mc.Name != "corral" || mc.Version != "0.1.0" || mc.PURL != "pkg:golang/github.com/corralcache/corral@v0.1.0" ||
		len(mc.Hashes) != 1 || mc.Hashes[0].Alg != "SHA-256" || len(mc.Hashes[0].Content) != 64 {
		t.Fatalf("the binary's component: %+v", mc)
	}
	if !slices.Contains(mc.Properties, property{Name: "vcs:revision", Value: "abc123"}) {
		t.Errorf("the commit is not among the binary's properties: %+v", mc.Properties)
	}
	// go version -m: "\tdep\tpath\tversion\th1:…" per module (and "=>" lines for replacements).
	gv, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	wantTime := "2023-11-14T22:13:20Z" // SOURCE_DATE_EPOCH's, unless the build recorded the commit's
	if _, after, ok := strings.Cut(string(gv), "vcs.time="); ok {
		wantTime, _, _ = strings.Cut(after, "\n")
	}
	if got.Metadata.Timestamp != wantTime {
		t.Errorf("timestamp %q, want %q", got.Metadata.Timestamp, wantTime)
	}
	var want []string
	for line := range strings.Lines(string(gv)) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "dep" {
			want = append(want, "pkg:golang/"+f[1]+"@"+f[2]+" "+f[3])
		}
	}
	var listed []string
	for _, c := range got.Components {
		if c.Name == "std" {
			continue
		}
		var sum string
		for _, p := range c.Properties {
			if p.Name == "go:sum" {
				sum = p.Value
			}
		}
		listed = append(listed, c.PURL+" "+sum)
	}
	slices.Sort(want)
	slices.Sort(listed)
	if len(want) < 10 || !slices.Equal(listed, want) {
		t.Fatalf("the SBOM lists\n%s\ngo version -m lists\n%s", strings.Join(listed, "\n"), strings.Join(want, "\n"))
	}
}

func TestGenerateRefusesWhatIsNotAGoBinary(t *testing.T) {
	if _, err := Generate("sbom_test.go", "", "", ""); err == nil {
		t.Fatal("a Go source file gave an SBOM")
	}
}
