package e2e_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/edgefleet/edgefleet/e2e/e2ebed"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// fleet is a global control plane with the admission webhooks registered, three site control
// planes (two sites, and one that a ClusterSimulator answers on for many simulated sites) and
// bin/global-controller serving the webhooks. The suites on real hosts are in e2e/realhosts.
var fleet *testfleet.Fleet

// controllerArgs make the controller notice site changes within seconds.
var controllerArgs = testfleet.QuickSiteChecks()

var _ = e2ebed.Fleet(&fleet, testfleet.FleetOptions{Sites: []string{"site-a", "site-b", "sim"}, ControllerArgs: controllerArgs})

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	testutil.RunSpecs(t, "edgefleet end-to-end")
}
