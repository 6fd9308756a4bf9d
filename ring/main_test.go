package ring

import (
	"testing"

	"github.com/corralcache/corral/internal/leakcheck"
)

// The failover test reads the ring from goroutines: none may outlive the tests.
func TestMain(m *testing.M) { leakcheck.Main(m) }
