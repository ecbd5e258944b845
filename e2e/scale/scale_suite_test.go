package scale_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// fleet is a global control plane, one site control plane that a ClusterSimulator answers on for
// many simulated sites, and bin/global-controller with its admission webhooks registered (every
// Site write of the campaign passes them, across the controller's kills). A fleet of its own: a
// thousand sites would weigh on the other end-to-end specs.
var fleet *testfleet.Fleet

// controllerArgs: heartbeats far apart (a thousand sites), operations followed every second.
var controllerArgs = []string{"--site-heartbeat-interval=5m", "--site-operation-poll-interval=1s", "--site-timeout=5s"}

func TestScale(t *testing.T) {
	RegisterFailHandler(Fail)
	testutil.RunSpecs(t, "edgefleet end-to-end at scale")
}

var _ = BeforeSuite(func(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	fleet, err = testfleet.StartFleet(ctx, testfleet.FleetOptions{Sites: []string{"sim"}, ControllerArgs: controllerArgs})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(fleet.Stop()).To(Succeed())
	})
})

// Dump the controller's log when a spec fails.
var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && fleet != nil {
		AddReportEntry("global controller", fleet.ControllerState(60))
	}
})
