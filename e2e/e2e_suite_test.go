package e2e_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// fleet is a global control plane, seven site control planes (six sites, and one that a
// ClusterSimulator answers on for many simulated sites) and bin/global-controller.
var fleet *testenv.Fleet

// controllerArgs make the controller notice site changes within seconds.
var controllerArgs = []string{"--site-heartbeat-interval=2s", "--site-operation-poll-interval=500ms", "--site-min-retry-interval=250ms", "--site-timeout=2s"}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "edgefleet end-to-end")
}

var _ = BeforeSuite(func(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	fleet, err = testenv.StartFleet(ctx, testenv.FleetOptions{
		Sites:          []string{"site-a", "site-b", "site-c", "site-d", "site-e", "site-f", "sim"},
		ControllerArgs: controllerArgs,
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(fleet.Stop()).To(Succeed())
	})
})

// Dump the controller's log when a spec fails.
var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && fleet != nil {
		AddReportEntry("global controller log", fleet.ControllerLog())
	}
})
