package resp

import (
	"testing"

	"github.com/corralcache/corral/internal/fuzzcorpus"
)

// TestFuzzCorpus keeps testdata/fuzz in step with the seeds in code (see package fuzzcorpus;
// -fuzzcorpus.update writes them).
func TestFuzzCorpus(t *testing.T) {
	fuzzcorpus.Check(t, "FuzzRESPCommand", respSeeds())
	fuzzcorpus.Check(t, "FuzzRESPReader", readerSeeds())
	fuzzcorpus.Check(t, "FuzzInlineArgs", inlineSeeds())
	fuzzcorpus.Check(t, "FuzzParseCommand", loopSeeds())
}
