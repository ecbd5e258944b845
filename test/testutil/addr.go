package testutil

import (
	"strconv"
	"testing"

	"github.com/edgefleet/edgefleet/test/internal/proc"
)

// FreeAddr is a loopback address, 127.0.0.1:<port>, where nothing listened when it was chosen.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ports, err := proc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(ports[0])
}
