package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strconv"
	"time"
)

// The parts of CycloneDX 1.5 (https://cyclonedx.org/docs/1.5/json/) this tool writes.
type (
	bom struct {
		BOMFormat    string       `json:"bomFormat"`
		SpecVersion  string       `json:"specVersion"`
		SerialNumber string       `json:"serialNumber"`
		Version      int          `json:"version"`
		Metadata     metadata     `json:"metadata"`
		Components   []component  `json:"components"`
		Dependencies []dependency `json:"dependencies"`
	}
	metadata struct {
		Timestamp string    `json:"timestamp,omitempty"`
		Tools     tools     `json:"tools"`
		Component component `json:"component"`
	}
	tools struct {
		Components []component `json:"components"`
	}
	component struct {
		Type       string     `json:"type"`
		BOMRef     string     `json:"bom-ref,omitempty"`
		Name       string     `json:"name"`
		Version    string     `json:"version,omitempty"`
		PURL       string     `json:"purl,omitempty"`
		Hashes     []hash     `json:"hashes,omitempty"`
		Properties []property `json:"properties,omitempty"`
	}
	hash struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	}
	property struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	dependency struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	}
)

// Generate returns the CycloneDX JSON of the Go binary at file. version names the release
// ("" = the main module's recorded version), commit the commit it was built from ("" = the
// one the build recorded, if any: a -trimpath build records no -ldflags, so a commit stamped
// with -X is not in it); sourceDateEpoch (Unix seconds, or "") is the timestamp when the build
// recorded no commit time.
func Generate(file, version, commit, sourceDateEpoch string) ([]byte, error) {
	bin, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	bi, err := buildinfo.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	sum := sha256.Sum256(bin)
	if version == "" {
		version = bi.Main.Version
	}

	main := component{
		Type:    "application",
		Name:    path.Base(bi.Path),
		Version: version,
		PURL:    purl(bi.Main.Path, moduleVersion(version)),
		Hashes:  []hash{{Alg: "SHA-256", Content: hex.EncodeToString(sum[:])}},
		Properties: []property{
			{Name: "go:package", Value: bi.Path},
			{Name: "go:toolchain", Value: bi.GoVersion},
		},
	}
	main.BOMRef = main.PURL
	if commit != "" {
		main.Properties = append(main.Properties, property{Name: "vcs:revision", Value: commit})
	}
	var timestamp string
	for _, s := range bi.Settings {
		main.Properties = append(main.Properties, property{Name: "go:build:" + s.Key, Value: s.Value})
		if s.Key == "vcs.time" {
			timestamp = s.Value
		}
	}
	if timestamp == "" && sourceDateEpoch != "" {
		secs, err := strconv.ParseInt(sourceDateEpoch, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", sourceDateEpoch, err)
		}
		timestamp = time.Unix(secs, 0).UTC().Format(time.RFC3339)
	}

	// The standard library is linked in too: its version is the toolchain's.
	std := purl("std", bi.GoVersion)
	components := []component{{Type: "library", BOMRef: std, Name: "std", Version: bi.GoVersion, PURL: std}}
	for _, d := range bi.Deps {
		m := d
		c := component{Type: "library", Name: d.Path, Version: d.Version}
		if d.Replace != nil { // what is linked is the replacement
			m = d.Replace
			c.Properties = append(c.Properties, property{Name: "go:replaces", Value: d.Path + "@" + d.Version})
		}
		c.PURL = purl(m.Path, m.Version)
		if m.Sum != "" {
			// The go.sum hash of the module (h1: a SHA-256 over its files' hashes), not of one
			// file: a property, since CycloneDX's hashes are of the component's bytes.
			c.Properties = append(c.Properties, property{Name: "go:sum", Value: m.Sum})
		}
		c.BOMRef = c.PURL
		components = append(components, c)
	}
	deps := dependency{Ref: main.BOMRef}
	for _, c := range components {
		deps.DependsOn = append(deps.DependsOn, c.BOMRef)
	}

	out := bom{
		BOMFormat:    "CycloneDX",
		SpecVersion:  "1.5",
		SerialNumber: "urn:uuid:" + uuidFrom(sum),
		Version:      1,
		Metadata: metadata{
			Timestamp: timestamp,
			Tools:     tools{Components: []component{{Type: "application", Name: "corral release/sbom"}}},
			Component: main,
		},
		Components: components,
		// The binary links every module, directly or not; which needs which is not recorded.
		Dependencies: []dependency{deps},
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// purl is the package URL of a Go module version (github.com/package-url/purl-spec, type
// golang).
func purl(module, version string) string {
	if version == "" || version == "(devel)" {
		return "pkg:golang/" + module
	}
	return "pkg:golang/" + module + "@" + version
}

// moduleVersion is a release's version as a Go module's tag spells it: "0.1.0" is v0.1.0.
func moduleVersion(v string) string {
	if v == "" || v == "(devel)" || v[0] == 'v' {
		return v
	}
	return "v" + v
}

// uuidFrom formats the first 16 bytes of sum as an RFC 9562 UUID of version 8 (custom), so that
// the same binary always gets the same serial number.
func uuidFrom(sum [32]byte) string {
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
