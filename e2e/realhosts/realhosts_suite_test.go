package realhosts_test

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/edgefleet/edgefleet/pkg/testenv"
)

// fleet is a global control plane, a site control plane per real-host site and
// bin/global-controller.
var fleet *testenv.Fleet

func TestRealHosts(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "edgefleet end-to-end on real hosts")
}

var _ = BeforeSuite(func(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	fleet, err = testenv.StartFleet(ctx, testenv.FleetOptions{
		Sites:          []string{"site-d", "site-e", "site-f"},
		ControllerArgs: testenv.QuickSiteChecks(),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(fleet.Stop()).To(Succeed())
	})
})

// The secrets sweep, once every spec ran: none of the secrets the run gave edgefleet to handle,
// nor the application clusters' admin keys and the sites' artifact tokens, is in clear in any
// file of the global, site and application control planes or the bed's logs and files. The BPA
// suite sweeps its test hosts' disks itself, before they go.
var _ = AfterSuite(func(ctx context.Context) {
	if fleet == nil {
		return
	}
	sweep, err := fleet.Sweep(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(sweep.Found).To(BeEmpty(), "secrets in clear")
	AddReportEntry("secrets sweep", fmt.Sprintf("%d secrets, %d files, none in clear", sweep.Secrets, sweep.Files))
})

// Dump the controller's log when a spec fails.
var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && fleet != nil {
		AddReportEntry("global controller log", fleet.ControllerLog())
	}
})
