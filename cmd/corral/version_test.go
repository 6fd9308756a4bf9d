package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"
)

// A test binary has no release version stamped and no module version: "dev".
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{arg}, &out, &errOut); code != 0 {
			t.Fatalf("corral %s: exit %d, %s", arg, code, errOut.String())
		}
		if !regexp.MustCompile(`^corral dev \(go1\.\d+\S* \w+/\w+(, commit [0-9a-f]+(\+modified)?)?\)\n$`).MatchString(out.String()) {
			t.Fatalf("corral %s printed %q", arg, out.String())
		}
	}
	version = "1.2.3"
	t.Cleanup(func() { version = "" })
	if got := versionInfo(); !regexp.MustCompile(`^corral 1\.2\.3 \(`).MatchString(got) {
		t.Fatalf("with -X main.version=1.2.3: %q", got)
	}
}
