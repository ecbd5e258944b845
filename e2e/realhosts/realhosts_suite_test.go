package realhosts_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/edgefleet/edgefleet/e2e/e2ebed"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// fleet is a global control plane with the admission webhooks registered, a site control plane
// per real-host site, bin/global-controller and the Vault it reads site-d's kubeconfig and BMC
// credentials from. The BPA suite sweeps its test hosts' disks itself, before they go.
var fleet *testfleet.Fleet

var _ = e2ebed.Fleet(&fleet, testfleet.FleetOptions{Sites: []string{"site-d", "site-e", "site-f"}, ControllerArgs: testfleet.QuickSiteChecks(), Vault: true})

func TestRealHosts(t *testing.T) {
	RegisterFailHandler(Fail)
	testutil.RunSpecs(t, "edgefleet end-to-end on real hosts")
}
