package bench

import (
	"testing"

	"github.com/rankd/rankd/internal/testenv"
)

// TestMain runs the test binary as the broker when servers.StartBroker
// starts it again (testenv.Main calls servers.Child).
func TestMain(m *testing.M) { testenv.Main(m) }
