// Package e2ebed is the bed of edgefleet's end-to-end ginkgo suites: a testfleet.Fleet started
// before the suite, the secrets sweep after it, and the controller's log on a failed spec.
package e2ebed

import (
	"context"
	"fmt"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/edgefleet/edgefleet/test/testfleet"
)

// Fleet registers, at the top level of a suite, a BeforeSuite that starts a Fleet of opts into
// *fleet (stopped after the suite); an AfterSuite, the secrets sweep: none of the secrets the run
// gave edgefleet to handle (BMC passwords, site credentials, enrollment tokens), nor the sites'
// artifact tokens and the application clusters' admin keys, is in clear in any file of the
// global and site control planes (etcd data and write-ahead logs), the artifact database, or
// the bed's logs and kubeconfigs; and the controller's log reported with a failed spec. It returns true, for `var _ = e2ebed.Fleet(...)`.
func Fleet(fleet **testfleet.Fleet, opts testfleet.FleetOptions) bool {
	ginkgo.BeforeSuite(func(ctx context.Context) {
		ctrl.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter)))
		f, err := testfleet.StartFleet(ctx, opts)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		*fleet = f
		ginkgo.DeferCleanup(func() {
			gomega.Expect(f.Stop()).To(gomega.Succeed())
		})
	})
	ginkgo.AfterSuite(func(ctx context.Context) {
		if *fleet == nil {
			return
		}
		sweep, err := (*fleet).Sweep(ctx)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(sweep.Found).To(gomega.BeEmpty(), "secrets in clear")
		ginkgo.AddReportEntry("secrets sweep", fmt.Sprintf("%d secrets, %d files, none in clear", sweep.Secrets, sweep.Files))
	})
	ginkgo.ReportAfterEach(func(r ginkgo.SpecReport) {
		if r.Failed() && *fleet != nil {
			ginkgo.AddReportEntry("global controller", (*fleet).ControllerState(60))
		}
	})
	return true
}
