// Command sbom writes the software bill of materials of a Go binary as CycloneDX 1.5 JSON: the
// binary itself, with its SHA-256 and build settings, and every module linked into it, read
// from the build information the Go toolchain embeds (what `go version -m` prints), so the list
// is what the binary holds, not what go.mod could pull in. The output is deterministic: its
// serial number derives from the binary's hash, its timestamp is the commit's time the build
// recorded (vcs.time), else $SOURCE_DATE_EPOCH, else it has none.
//
//	go run ./release/sbom -version 0.1.0 -commit $(git rev-parse HEAD) corral-0.1.0-linux-amd64 > corral-0.1.0-linux-amd64.cdx.json
//
// make release runs it for every binary it builds (release/release.sh).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	version := flag.String("version", "", "the release the binary is (its component's version); \"\" = the module version it records")
	commit := flag.String("commit", "", "the commit the binary was built from, when its build information lacks it")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: sbom [-version V] binary > bom.cdx.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	bom, err := Generate(flag.Arg(0), *version, *commit, os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
	os.Stdout.Write(bom)
}
