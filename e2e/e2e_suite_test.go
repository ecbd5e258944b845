package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
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

// The secrets sweep, once every spec ran: none of the secrets the run gave edgefleet to handle
// is in clear anywhere the fleet wrote — the global, site and application control planes' etcd
// data (write-ahead logs included), the global controller's artifact database, every log and
// kubeconfig of the bed. The BPA suite sweeps its test hosts' disks itself, before they go.
var _ = AfterSuite(func(ctx context.Context) {
	if fleet == nil {
		return
	}
	secrets := fleet.SweepSecrets()
	// What the global controller pushed to each site, and what each site's BPA wrote: the
	// site's artifact token and the application cluster's admin kubeconfig.
	for name, site := range fleet.Sites {
		list := &corev1.SecretList{}
		Expect(site.Client.List(ctx, list)).To(Succeed())
		for _, s := range list.Items {
			switch {
			case s.Name == sitev1.GlobalAPISecretName:
				secrets["the artifact token of site "+name] = s.Data[sitev1.GlobalAPITokenKey]
			case s.Type == clusterv1.ClusterSecretType && strings.HasSuffix(s.Name, "-kubeconfig"):
				cfg, err := clientcmd.Load(s.Data["value"])
				Expect(err).NotTo(HaveOccurred())
				for user, u := range cfg.AuthInfos {
					if len(u.ClientKeyData) > 0 {
						secrets[fmt.Sprintf("the client key of %s in %s's %s", user, name, s.Name)] = u.ClientKeyData
					}
				}
			}
		}
	}
	for what, s := range secrets {
		if len(s) == 0 {
			delete(secrets, what)
		}
	}
	Expect(secrets).NotTo(BeEmpty())
	found, scanned, err := testenv.FindSecrets(fleet.SweepDirs(), secrets)
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeEmpty(), "secrets in clear")
	// The scan reads etcd's files: what etcd keeps in clear, a key, is found there.
	control, _, err := testenv.FindSecrets(fleet.SweepDirs(), map[string][]byte{"the key of namespace edgefleet-system": []byte("/registry/namespaces/edgefleet-system")})
	Expect(err).NotTo(HaveOccurred())
	Expect(control).NotTo(BeEmpty(), "the sweep found no key of etcd: it looked in the wrong place")
	AddReportEntry("secrets sweep", fmt.Sprintf("%d secrets, %d files, none in clear", len(secrets), scanned))
})

// Dump the controller's log when a spec fails.
var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && fleet != nil {
		AddReportEntry("global controller log", fleet.ControllerLog())
	}
})
