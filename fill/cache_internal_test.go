package fill

import (
	"testing"
	"unsafe"
)

// An entry of a string value fills one 48-byte allocation size class; one field more costs
// 16 bytes per entry (the memory benchmark's goal is ≤ otter + 64 B per entry).
func TestEntryLayout(t *testing.T) {
	if size := unsafe.Sizeof(entry[string]{}); size != 48 {
		t.Fatalf("entry[string] is %d bytes, want 48", size)
	}
}
