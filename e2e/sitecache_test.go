package e2e_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/restconfig"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testfleet"
	"github.com/edgefleet/edgefleet/test/testutil"
)

var _ = Describe("Site artifact cache", Ordered, func() {
	type artifact struct {
		kind, name string
		data       []byte
		digest, id string
	}
	var (
		artifacts = []*artifact{
			{kind: "os-image", name: "edge-os"},
			{kind: "binary-package", name: "node-agent-cache"},
		}
		total    int64
		proxy    *testutil.CutProxy
		cutAfter = int64(6 << 20)
		local    = map[string]testfleet.LocalController{}
	)

	BeforeAll(func(ctx context.Context) {
		dir := GinkgoT().TempDir()
		for i, a := range artifacts {
			size, seed := []int{16<<20 + 5, 3<<20 + 1}[i], uint64(100+i)
			a.data, a.digest = testutil.RandomContent(size, seed)
			if a.kind == "binary-package" {
				var err error
				a.data, a.digest, err = builders.StandInPackage(a.name, "1.0.0", "amd64", size, seed)
				Expect(err).NotTo(HaveOccurred())
			}
			total += int64(len(a.data))
			file := filepath.Join(dir, a.name)
			Expect(os.WriteFile(file, a.data, 0o600)).To(Succeed())
			out, err := fleet.Edgefleet(ctx, "artifact", "upload", file, "--kind", a.kind, "--name", a.name, "--version", "1.0.0", "-o", "json")
			Expect(err).NotTo(HaveOccurred())
			var got restv1.Artifact
			Expect(json.Unmarshal(out, &got)).To(Succeed(), string(out))
			a.id = got.ID
			DeferCleanup(func(ctx context.Context) {
				_, err := fleet.Edgefleet(ctx, "artifact", "delete", a.id)
				Expect(err).NotTo(HaveOccurred())
			})
		}

		// site-b reaches the global API through a link that breaks in the middle of a transfer.
		api, err := url.Parse(fleet.APIURL)
		Expect(err).NotTo(HaveOccurred())
		proxy, err = testutil.StartCutProxy(api.Host, cutAfter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(proxy.Close)
		Expect(fleet.ConnectSite(ctx, "site-a", fleet.APIURL)).To(Succeed())
		Expect(fleet.ConnectSite(ctx, "site-b", "http://"+proxy.Addr)).To(Succeed())
		for _, site := range []string{"site-a", "site-b"} {
			lc, err := fleet.StartLocalController(ctx, site)
			Expect(err).NotTo(HaveOccurred())
			local[site] = lc
			DeferCleanup(func() error { return fleet.StopLocalController(site) })
		}
	})

	ReportAfterEach(func(r SpecReport) {
		if r.Failed() {
			for site, lc := range local {
				AddReportEntry(site+" local controller log", lc.Log)
			}
		}
	})

	createSet := func(ctx context.Context, site, name string, as ...*artifact) {
		set := &sitev1.ArtifactSet{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: name}}
		for _, a := range as {
			set.Spec.Artifacts = append(set.Spec.Artifacts, sitev1.ArtifactRef{SHA256: a.digest, Name: a.kind + " " + a.name})
		}
		Expect(fleet.Sites[site].Client.Create(ctx, set)).To(Succeed())
	}
	readySet := func(ctx context.Context, g Gomega, site, name string) *sitev1.ArtifactSet {
		set := &sitev1.ArtifactSet{}
		g.Expect(fleet.Sites[site].Client.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: name}, set)).To(Succeed())
		ready := apimeta.FindStatusCondition(set.Status.Conditions, sitev1.ArtifactSetReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
		g.Expect(set.Status.ObservedGeneration).To(Equal(set.Generation))
		return set
	}
	// get GETs u from site's cache as the site's admin (its client certificate).
	get := func(site, u string, header ...string) (int, []byte, http.Header) {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		Expect(err).NotTo(HaveOccurred())
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		c, err := fleet.SiteCacheClient(site)
		Expect(err).NotTo(HaveOccurred())
		resp, err := c.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, body, resp.Header
	}
	sum := func(b []byte) string {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}

	It("fetches the same artifacts into two sites, resuming the transfer that was cut", func(ctx context.Context) {
		for _, site := range []string{"site-a", "site-b"} {
			createSet(ctx, site, "release-1", artifacts...)
		}
		for _, site := range []string{"site-a", "site-b"} {
			var set *sitev1.ArtifactSet
			Eventually(func(g Gomega) { set = readySet(ctx, g, site, "release-1") }).
				WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			Expect(set.Status.Cached).To(Equal(int32(2)))
			Expect(set.Status.Total).To(Equal(int32(2)))
			for i, a := range artifacts {
				st := set.Status.Artifacts[i]
				Expect(st.SHA256).To(Equal(a.digest))
				Expect(st.Phase).To(Equal(sitev1.ArtifactCached))
				Expect(st.Size).To(Equal(int64(len(a.data))))
				Expect(st.URL).To(MatchRegexp(`^%s/sha256/%s\?signature=[0-9a-f]{64}$`, regexp.QuoteMeta(local[site].CacheURL), a.digest))

				status, body, h := get(site, st.URL)
				Expect(status).To(Equal(http.StatusOK))
				Expect(sum(body)).To(Equal(a.digest), "%s served by %s", a.name, site)
				Expect(h.Get("ETag")).To(Equal(`"sha256:` + a.digest + `"`))
				status, body, _ = get(site, st.URL, "Range", "bytes=1000-1999")
				Expect(status).To(Equal(http.StatusPartialContent))
				Expect(body).To(Equal(a.data[1000:2000]))
			}
		}
		// The cut link broke one transfer once; resuming it sent only what was missing. Had the
		// transfer started over, the link would have carried the cut part twice.
		Expect(proxy.Cuts()).To(Equal(1))
		Expect(proxy.Downstream()).To(BeNumerically(">", total))
		Expect(proxy.Downstream()).To(BeNumerically("<", total+cutAfter/2))
		Expect(metric(local["site-b"].MetricsURL, "edgefleet_site_cache_fetched_bytes_total")).To(Equal(float64(total)))
	})

	It("never serves a corrupted cached file, and fetches it again", func(ctx context.Context) {
		a := artifacts[0]
		path := filepath.Join(local["site-a"].CacheDir, "sha256", a.digest)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		Expect(err).NotTo(HaveOccurred())
		_, err = f.WriteAt([]byte("bit rot"), 4096)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.Close()).To(Succeed())
		later := time.Now().Add(time.Second) // a write after the fetch, past the clock's tick
		Expect(os.Chtimes(path, later, later)).To(Succeed())

		u := local["site-a"].CacheURL + "/sha256/" + a.digest
		status, body, _ := get("site-a", u)
		Expect(status).To(Equal(http.StatusServiceUnavailable), string(body))
		Expect(string(body)).To(ContainSubstring("failed verification"))

		Eventually(func(g Gomega) {
			status, body, _ := get("site-a", u)
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(sum(body)).To(Equal(a.digest))
			readySet(ctx, g, "site-a", "release-1")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(metric(local["site-a"].MetricsURL, "edgefleet_site_cache_corrupted_total")).To(Equal(1.0))
		Expect(metric(local["site-a"].MetricsURL, "edgefleet_site_cache_fetched_bytes_total")).To(Equal(float64(total + int64(len(a.data)))))
	})

	It("keeps its cache across a restart without fetching again", func(ctx context.Context) {
		lc, err := fleet.StartLocalController(ctx, "site-b")
		Expect(err).NotTo(HaveOccurred())
		local["site-b"] = lc
		Eventually(func(g Gomega) {
			set := readySet(ctx, g, "site-b", "release-1")
			g.Expect(set.Status.Artifacts[0].URL).To(HavePrefix(lc.CacheURL))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		for _, a := range artifacts {
			status, body, _ := get("site-b", lc.CacheURL+"/sha256/"+a.digest)
			Expect(status).To(Equal(http.StatusOK))
			Expect(sum(body)).To(Equal(a.digest))
		}
		Expect(metric(lc.MetricsURL, "edgefleet_site_cache_fetched_bytes_total")).To(Equal(0.0))
	})

	It("serves its readers only, over TLS, and goes on serving them through a certificate renewal", func(ctx context.Context) {
		const site = "site-a"
		cp := fleet.Sites[site]
		lc := local[site]
		u := lc.CacheURL + "/sha256/" + artifacts[1].digest
		ca, err := os.ReadFile(lc.CacheCAFile)
		Expect(err).NotTo(HaveOccurred())
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(ca)).To(BeTrue())
		// get GETs url with c, the bearer token when given, and answers the status, the body
		// and the serial of the certificate the cache served.
		get := func(c *http.Client, url, token string) (int, string, string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			Expect(err).NotTo(HaveOccurred())
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := c.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			Expect(err).NotTo(HaveOccurred())
			serial := ""
			if resp.TLS != nil {
				serial = resp.TLS.PeerCertificates[0].SerialNumber.String()
			}
			return resp.StatusCode, string(body), serial
		}
		// A client with no credential of its own, a new connection (and handshake) per request.
		anonymous := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}

		By("refusing plain HTTP")
		Expect(u).To(HavePrefix("https://"))
		status, body, _ := get(&http.Client{Timeout: time.Minute}, "http://"+strings.TrimPrefix(u, "https://"), "")
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring("HTTP request to an HTTPS server"))

		By("refusing a request without credentials")
		status, body, _ = get(anonymous, u, "")
		Expect(status).To(Equal(http.StatusUnauthorized))
		Expect(body).To(ContainSubstring("Authorization"))
		Expect(body).NotTo(ContainSubstring(string(artifacts[1].data[:64])))

		By("refusing a site user without the grant, by its client certificate")
		strangerKubeconfig, err := cp.Kubeconfig("stranger")
		Expect(err).NotTo(HaveOccurred())
		strangerConfig, err := clientcmd.RESTConfigFromKubeConfig(strangerKubeconfig)
		Expect(err).NotTo(HaveOccurred())
		stranger, err := restconfig.HTTPClient(strangerConfig, lc.CacheCAFile, time.Minute)
		Expect(err).NotTo(HaveOccurred())
		status, body, _ = get(stranger, u, "")
		Expect(status).To(Equal(http.StatusForbidden))
		Expect(body).To(ContainSubstring(`user \"stranger\" may not get artifacts.site.edgefleet.io`))

		By("serving the URL its ArtifactSet status names, signed for the digest, without a credential (Ironic's agent reads the OS image so), and no other content by that signature")
		var signed string
		Eventually(func(g Gomega) {
			sets := &sitev1.ArtifactSetList{}
			g.Expect(cp.Client.List(ctx, sets, client.InNamespace(sitev1.InfoNamespace))).To(Succeed())
			for _, set := range sets.Items {
				for _, a := range set.Status.Artifacts {
					if a.SHA256 == artifacts[1].digest && a.URL != "" {
						signed = a.URL
					}
				}
			}
			g.Expect(signed).NotTo(BeEmpty(), "no ArtifactSet of %s names sha256:%s's URL", site, artifacts[1].digest)
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(signed).To(HavePrefix(u + "?signature="))
		status, body, _ = get(anonymous, signed, "")
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(sum([]byte(body))).To(Equal(artifacts[1].digest))
		_, signature, _ := strings.Cut(signed, "?")
		status, body, _ = get(anonymous, lc.CacheURL+"/sha256/"+artifacts[0].digest+"?"+signature, "")
		Expect(status).To(Equal(http.StatusForbidden))
		Expect(body).To(ContainSubstring("is not this site cache's for sha256:" + artifacts[0].digest))
		tampered := []byte(signed)
		tampered[len(tampered)-1] ^= 1 // another hex digit
		status, _, _ = get(anonymous, string(tampered), "")
		Expect(status).To(Equal(http.StatusForbidden))

		By("serving a ServiceAccount bound to the shipped BPA role, by its bearer token")
		Expect(cp.ApplyManifest(ctx, "deploy/rbac/bpa/role.yaml")).To(Succeed())
		cs, err := kubernetes.NewForConfig(cp.Config)
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().ServiceAccounts(sitev1.InfoNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "cache-reader"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-cache-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edgefleet-bpa"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sitev1.InfoNamespace, Name: "cache-reader"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts(sitev1.InfoNamespace).CreateToken(ctx, "cache-reader", &authnv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The binding reaches RBAC's informer, and the cache's answers are cached for 10s.
		Eventually(func(g Gomega) {
			status, body, _ := get(anonymous, u, tr.Status.Token)
			g.Expect(status).To(Equal(http.StatusOK), body)
			g.Expect(sum([]byte(body))).To(Equal(artifacts[1].digest))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())

		By("serving the renewed certificate without a restart: new connections get it, the open one goes on")
		admin, err := fleet.SiteCacheClient(site)
		Expect(err).NotTo(HaveOccurred())
		status, _, before := get(admin, u, "")
		Expect(status).To(Equal(http.StatusOK))
		renewed, err := fleet.RenewSiteCacheCertificate(site)
		Expect(err).NotTo(HaveOccurred())
		Expect(renewed.String()).NotTo(Equal(before))
		Eventually(func(g Gomega) {
			status, body, serial := get(anonymous, u, tr.Status.Token)
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(sum([]byte(body))).To(Equal(artifacts[1].digest))
			g.Expect(serial).To(Equal(renewed.String()))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		status, body, _ = get(admin, u, "")
		Expect(status).To(Equal(http.StatusOK))
		Expect(sum([]byte(body))).To(Equal(artifacts[1].digest))
	})

	It("says when the site has no credentials for the global API, and why a fetch fails", func(ctx context.Context) {
		site := fleet.Sites["site-b"]
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.HostsNamespace, Name: sitev1.GlobalAPISecretName}}
		Expect(site.Client.Delete(ctx, secret)).To(Succeed())
		_, unknown := testutil.RandomContent(10, 999)
		createSet(ctx, "site-b", "unknown", &artifact{kind: "binary-package", name: "never-uploaded", digest: unknown})
		reason := func(g Gomega) (string, string) {
			set := &sitev1.ArtifactSet{}
			g.Expect(site.Client.Get(ctx, client.ObjectKey{Namespace: sitev1.InfoNamespace, Name: "unknown"}, set)).To(Succeed())
			ready := apimeta.FindStatusCondition(set.Status.Conditions, sitev1.ArtifactSetReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			return ready.Reason, ready.Message
		}
		Eventually(func(g Gomega) {
			r, msg := reason(g)
			g.Expect(r).To(Equal(sitev1.ReasonGlobalAPINotConfigured))
			g.Expect(msg).To(ContainSubstring(sitev1.GlobalAPISecretName))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		Expect(fleet.ConnectSite(ctx, "site-b", fleet.APIURL)).To(Succeed())
		Eventually(func(g Gomega) {
			r, msg := reason(g)
			g.Expect(r).To(Equal(sitev1.ReasonFetchFailed))
			g.Expect(msg).To(ContainSubstring("sha256:" + unknown))
			g.Expect(msg).To(ContainSubstring("404"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(site.Client.Delete(ctx, &sitev1.ArtifactSet{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: "unknown"}})).To(Succeed())
	})

	It("rejects an ArtifactSet with a malformed digest, naming the field", func(ctx context.Context) {
		set := &sitev1.ArtifactSet{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: "bad"}}
		set.Spec.Artifacts = []sitev1.ArtifactRef{{SHA256: "sha256:" + artifacts[0].digest}}
		err := fleet.Sites["site-a"].Client.Create(ctx, set)
		Expect(err).To(MatchError(ContainSubstring("spec.artifacts[0].sha256")))
		set.Spec.Artifacts = nil
		Expect(fleet.Sites["site-a"].Client.Create(ctx, set)).To(MatchError(ContainSubstring("spec.artifacts")))
	})

	It("removes from the cache what no ArtifactSet lists any more", func(ctx context.Context) {
		createSet(ctx, "site-a", "release-2", artifacts[1])
		Eventually(func(g Gomega) { readySet(ctx, g, "site-a", "release-2") }).
			WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(fleet.Sites["site-a"].Client.Delete(ctx, &sitev1.ArtifactSet{ObjectMeta: metav1.ObjectMeta{Namespace: sitev1.InfoNamespace, Name: "release-1"}})).To(Succeed())
		cache := local["site-a"].CacheDir
		Eventually(func() ([]string, error) {
			names, err := filepath.Glob(filepath.Join(cache, "*", "*"))
			for i := range names {
				names[i] = strings.TrimPrefix(names[i], cache+"/")
			}
			return names, err
		}).WithTimeout(30 * time.Second).Should(ConsistOf("sha256/" + artifacts[1].digest))
		status, _, _ := get("site-a", local["site-a"].CacheURL+"/sha256/"+artifacts[0].digest)
		Expect(status).To(Equal(http.StatusNotFound))
	})
})

// metric reads the value of an unlabelled metric from a Prometheus endpoint.
func metric(metricsURL, name string) (float64, error) {
	resp, err := http.Get(metricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		var v float64
		if strings.HasPrefix(line, name+" ") {
			_, err := fmt.Sscanf(strings.TrimPrefix(line, name+" "), "%g", &v)
			return v, err
		}
	}
	return 0, fmt.Errorf("metric %s not found at %s", name, metricsURL)
}
