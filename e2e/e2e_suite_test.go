package e2e_test

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

// fleet is a global control plane, four site control planes (three sites, and one that a
// ClusterSimulator answers on for many simulated sites) and bin/global-controller. The suites on
// real hosts are in e2e/realhosts.
var fleet *testenv.Fleet

// controllerArgs make the controller notice site changes within seconds.
var controllerArgs = testenv.QuickSiteChecks()

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "edgefleet end-to-end")
}

var _ = BeforeSuite(func(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	fleet, err = testenv.StartFleet(ctx, testenv.FleetOptions{
		Sites:          []string{"site-a", "site-b", "site-c", "sim"},
		ControllerArgs: controllerArgs,
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(fleet.Stop()).To(Succeed())
	})
})

// The secrets sweep, once every spec ran: none of the secrets the run gave edgefleet to handle
// (BMC passwords, site credentials, enrollment tokens), nor the sites' artifact tokens, is in
// clear in any file of the global and site control planes (etcd data and write-ahead logs), the
// global controller's artifact database, or the bed's logs and kubeconfigs.
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
