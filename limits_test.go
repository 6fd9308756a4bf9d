package corral_test

import (
	"testing"

	"github.com/corralcache/corral"
	"github.com/corralcache/corral/internal/lease"
)

// The public limits of leases are the protocol's: the owner checks a peer's request against
// the same limits a caller's is checked against here. (Their errors are the protocol's own
// sentinels.)
func TestLeaseLimitsAndErrorsAreTheProtocols(t *testing.T) {
	tests := []struct {
		name          string
		public, inner any
	}{
		{"MinLeaseFill", corral.MinLeaseFill, lease.MinFill},
		{"MaxLeaseFill", corral.MaxLeaseFill, lease.MaxFill},
		{"MaxLeaseWait", corral.MaxLeaseWait, lease.MaxWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.public != tt.inner {
				t.Fatalf("corral says %v, package lease %v", tt.public, tt.inner)
			}
		})
	}
}
