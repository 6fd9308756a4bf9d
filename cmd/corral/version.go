package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the release this binary is: the release build sets it (make release, make image:
// -ldflags "-X main.version=0.1.0", from the file VERSION). "" falls back to the module version
// that `go install github.com/corralcache/corral/cmd/corral@v0.1.0` records, else "dev".
var version = ""

// commit is the commit the release was built from, set like version (-X main.commit=…): a
// build whose toolchain records no VCS information (-buildvcs=false, or no git) still says it.
// "" = the vcs.revision the build recorded, if any.
var commit = ""

// versionInfo is what `corral version` prints: the version, the commit it was built from when
// the build recorded one (a build in a git checkout does, unless -buildvcs=false), the Go
// toolchain and the platform.
func versionInfo() string {
	v, rev := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					rev = s.Value
				}
			case "vcs.modified":
				if commit == "" && s.Value == "true" {
					rev += "+modified"
				}
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if rev != "" {
		rev = ", commit " + rev
	}
	return fmt.Sprintf("corral %s (%s %s/%s%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH, rev)
}

// printVersion writes versionInfo and a newline to w, and returns the exit code.
func printVersion(w io.Writer) int {
	fmt.Fprintln(w, versionInfo())
	return 0
}
