package e2e_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/discovery"
)

// columns splits kubectl's table output into rows of fields.
func columns(out []byte) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

var _ = Describe("Site and host registration", Ordered, func() {
	BeforeAll(func(ctx context.Context) {
		Expect(fleet.Apply(ctx, "deploy/samples/fleet.yaml")).To(Succeed())
	})

	It("shows both sites Ready in kubectl with their version and host counts", func(ctx context.Context) {
		var rows [][]string
		Eventually(func(g Gomega) {
			out, err := fleet.Kubectl(ctx, "get", "sites", "-n", "fleet")
			g.Expect(err).NotTo(HaveOccurred())
			rows = columns(out)
			g.Expect(rows).To(HaveLen(3))
			for _, r := range rows[1:] {
				// RELEASE and OPERATION are empty: no campaign has run here.
				g.Expect(r).To(HaveLen(6), "columns of %v", r)
				g.Expect(r[1:3]).To(Equal([]string{"True", "True"}), "READY and REACHABLE of %v", r)
			}
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())

		Expect(rows[0]).To(Equal([]string{"NAME", "READY", "REACHABLE", "VERSION", "HOSTS", "RELEASE", "OPERATION", "AGE"}))
		// What the site's own API server reports.
		info, err := discovery.NewDiscoveryClientForConfigOrDie(fleet.Sites["site-a"].Config).ServerVersion()
		Expect(err).NotTo(HaveOccurred())
		version := info.GitVersion
		Expect(version).To(HavePrefix("v1."))
		Expect(rows[1]).To(HaveExactElements("site-a", "True", "True", version, "2", Not(BeEmpty())))
		Expect(rows[2]).To(HaveExactElements("site-b", "True", "True", version, "1", Not(BeEmpty())))
	})

	It("shows the hosts bound to their sites", func(ctx context.Context) {
		Eventually(func(g Gomega) {
			out, err := fleet.Kubectl(ctx, "get", "hosts", "-n", "fleet")
			g.Expect(err).NotTo(HaveOccurred())
			rows := columns(out)
			g.Expect(rows).To(HaveLen(4))
			g.Expect(rows[0]).To(Equal([]string{"NAME", "SITE", "ROLE", "BOOT-MAC", "READY", "PROVISIONING", "AGE"}))
			for _, r := range rows[1:] {
				// PROVISIONING is empty: these sites have no application cluster.
				g.Expect(r).To(HaveLen(6), "columns of %v", r)
			}
			g.Expect(rows[1][:5]).To(Equal([]string{"site-a-cp-0", "site-a", "control-plane", "52:54:00:0a:00:01", "True"}))
			g.Expect(rows[2][:5]).To(Equal([]string{"site-a-worker-0", "site-a", "worker", "52:54:00:0a:00:02", "True"}))
			g.Expect(rows[3][:5]).To(Equal([]string{"site-b-cp-0", "site-b", "control-plane", "52:54:00:0b:00:01", "True"}))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	})

	It("exports site reachability as Prometheus metrics", func(ctx context.Context) {
		Eventually(func(g Gomega) {
			resp, err := http.Get(fleet.MetricsURL)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(body)).To(ContainSubstring(`edgefleet_site_reachable{namespace="fleet",site="site-a"} 1`))
			g.Expect(string(body)).To(ContainSubstring(`edgefleet_site_reachable{namespace="fleet",site="site-b"} 1`))
			g.Expect(string(body)).To(ContainSubstring(`edgefleet_site_probe_duration_seconds_count`))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("rejects an invalid host through kubectl, naming the field, and creates nothing", func(ctx context.Context) {
		bad := `apiVersion: fleet.edgefleet.io/v1alpha1
kind: Host
metadata: {name: bad-host, namespace: fleet}
spec:
  siteRef: {name: site-a}
  role: worker
  bootMACAddress: "52:54:00:0a:00"
  bmc: {address: "ipmi://192.0.2.99", credentialsSecretRef: {name: x}}
`
		out, err := fleet.KubectlStdin(ctx, bad, "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		Expect(string(out)).To(ContainSubstring("spec.bootMACAddress"))
		_, err = fleet.Kubectl(ctx, "get", "host", "bad-host", "-n", "fleet")
		Expect(err).To(MatchError(ContainSubstring("NotFound")))
	})

	It("marks a site unreachable when its API server stops, and Ready again when it returns", func(ctx context.Context) {
		site := fleet.Sites["site-b"]
		Expect(site.StopAPIServer()).To(Succeed())
		Eventually(func(g Gomega) {
			out, err := fleet.Kubectl(ctx, "get", "site", "site-b", "-n", "fleet", "-o", `jsonpath={.status.conditions[?(@.type=="Reachable")].status} {.status.conditions[?(@.type=="Reachable")].message}`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(HavePrefix("False "))
			g.Expect(string(out)).To(ContainSubstring("connection refused"))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		// The other site is not affected.
		Expect(string(must(fleet.Kubectl(ctx, "get", "site", "site-a", "-n", "fleet", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)))).To(Equal("True"))

		Expect(site.StartAPIServer()).To(Succeed())
		Eventually(func(g Gomega) {
			out, err := fleet.Kubectl(ctx, "get", "site", "site-b", "-n", "fleet", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal("True"))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	})

	It("keeps every site Ready across a restart of the global controller", func(ctx context.Context) {
		Expect(fleet.StopController()).To(Succeed())
		Expect(fleet.StartController(ctx, controllerArgs...)).To(Succeed())
		Consistently(func(g Gomega) {
			out, err := fleet.Kubectl(ctx, "get", "sites", "-n", "fleet", "-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{" "}{end}`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Fields(string(out))).To(Equal([]string{"True", "True"}))
		}).WithContext(ctx).WithTimeout(6 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})
})

func must(b []byte, err error) []byte {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return b
}
