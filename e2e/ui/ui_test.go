package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	uberzap "go.uber.org/zap"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	"github.com/edgefleet/edgefleet/test/chromium"
)

// The checks run in order on the one test bed: sign in, look at every page, follow a patch
// campaign over the stores while it runs, pause and resume it from the UI, look at it as a
// viewer (no brakes, a forged resume refused), and cut site far off.
var _ = Describe("The web UI", Ordered, func() {
	const campaignName = "patch-stores"
	var admin *chromium.User
	BeforeAll(func() { admin = chromium.NewUser(browser, "admin") }) // a browser context for all the checks

	It("refuses a bad token, and signs in with a good one into a Secure, HttpOnly, SameSite=Strict cookie", func() {
		admin.Do(chromedp.Navigate(base + "/ui/sites"))
		admin.WaitFor("the login page", `location.pathname === '/ui/login' && !!document.querySelector('#token')`)
		admin.Screenshot("login")

		admin.SubmitToken("not-a-token")
		admin.WaitFor("why the token was refused", `(document.querySelector('#login-error')?.textContent ?? '').includes('rejected this token')`)

		admin.SubmitToken(adminToken)
		admin.WaitFor("the site list it was sent to first", `location.pathname === '/ui/sites' && !!document.querySelector('#site-table')`)
		var token *network.Cookie
		for _, c := range admin.Cookies(base + "/ui/") {
			if c.Name == "edgefleet-token" {
				token = c
			}
		}
		Expect(token).NotTo(BeNil(), "no edgefleet-token cookie")
		Expect(token.HTTPOnly).To(BeTrue())
		Expect(token.Secure).To(BeTrue())
		Expect(token.SameSite).To(Equal(network.CookieSameSiteStrict))
		Expect(token.Path).To(Equal("/ui"))
	})

	It("loads every page with the fleet's real data", func(ctx context.Context) {
		By("the overview: sites by state, releases, versions")
		admin.Open(base, "/ui/?namespace="+ns)
		admin.WaitFor("13 sites, all Ready", `document.querySelector('#total')?.textContent === '13' &&
			document.querySelector('[data-state="Ready"] .count')?.textContent === '13'`)
		Expect(admin.Text("#releases")).To(ContainSubstring("r0"))
		Expect(admin.Text("#versions")).To(ContainSubstring("v1.36.2"))
		admin.Screenshot("overview")

		By("the site list: filtered, sorted and paged on the server")
		admin.Open(base, "/ui/sites?namespace="+ns+"&size=5")
		Expect(admin.Text(".summary")).To(ContainSubstring("13 sites · page 1 of 3"))
		Expect(admin.Count("#site-table tbody tr.site")).To(Equal(5))
		Expect(admin.Text("#site-table tbody tr.site:first-child")).To(ContainSubstring("far-00000"))
		admin.Click("#next-page")
		Expect(admin.Text(".summary")).To(ContainSubstring("page 2 of 3"))
		admin.Open(base, "/ui/sites?namespace="+ns+"&sort=name&order=desc&q=store-0000")
		Expect(admin.Text(".summary")).To(ContainSubstring("10 sites match"))
		Expect(admin.Text("#site-table tbody tr.site:first-child")).To(ContainSubstring("store-00009"))
		admin.Screenshot("sites")

		By("a site: conditions with reasons, hosts, nodes, the BPA's packages and charts, events")
		admin.Open(base, "/ui/sites/"+ns+"/store-00001")
		Expect(admin.Text("#conditions")).To(And(ContainSubstring("Reachable"), ContainSubstring("APIServerReachable"), ContainSubstring("ClusterSynced")))
		Expect(admin.Text("#cluster-version")).To(Equal("v1.36.2"))
		Expect(admin.Text(`tr.host[data-host="store-00001-cp-0"]`)).To(And(ContainSubstring("provisioned"), ContainSubstring("Ready"), ContainSubstring("v1.36.2")))
		Expect(admin.Text("#packages")).To(And(ContainSubstring("kubelet"), ContainSubstring("1.36.2"), ContainSubstring("containerd")))
		Expect(admin.Text("#charts")).To(And(ContainSubstring("coredns"), ContainSubstring("deployed")))
		Expect(admin.Text("#events")).To(ContainSubstring("SiteReady"))
		admin.Screenshot("site")

		By("the releases: readiness, each artifact in the store with its size")
		admin.Open(base, "/ui/releases?namespace="+ns)
		Expect(admin.Text(`[data-release="r1"] h3`)).To(And(ContainSubstring("v1.36.3"), ContainSubstring("Ready True")))
		Expect(admin.Count(`[data-release="r1"] tr.release-artifact`)).To(BeNumerically(">", 1))
		Expect(admin.Count(`[data-release="r1"] tr.release-artifact[data-stored="no"]`)).To(BeZero())
		Expect(admin.Count("#store tr.artifact")).To(BeNumerically(">", 1))

		By("an upload under way: its progress, moving without a reload")
		upload := startUpload(ctx, 1<<20)
		appendUpload(ctx, upload, 0, 512<<10)
		admin.Open(base, "/ui/releases?namespace="+ns)
		Expect(admin.Text(`tr.upload[data-upload="` + upload + `"] .percent`)).To(Equal("50%"))
		admin.MarkLoaded()
		appendUpload(ctx, upload, 512<<10, 256<<10)
		admin.WaitFor("the upload at 75%", `document.querySelector('tr.upload[data-upload="`+upload+`"] .percent')?.textContent === '75%'`)
		Expect(admin.StillLoaded()).To(BeTrue(), "the releases page was reloaded")
		admin.Screenshot("releases")

		By("the campaigns: none yet")
		admin.Open(base, "/ui/campaigns?namespace="+ns)
		Expect(admin.Text("#live")).To(ContainSubstring("none"))
	})

	It("shows a site operator bound to some sites exactly those, and 403 on another's page", func(ctx context.Context) {
		mine := []string{"store-00002", "store-00005"}
		operator := chromium.NewUser(browser, "site operator")
		operator.SignIn(base, siteOperatorToken(ctx, "store-operator", mine))

		By("the overview counts their two sites, and says they may not see campaigns")
		operator.WaitFor("2 sites", `document.querySelector('#total')?.textContent === '2'`)
		Expect(operator.Text("#campaigns-denied")).To(ContainSubstring("may not list campaigns"))

		By("the site list shows exactly their sites")
		operator.Open(base, "/ui/sites")
		Expect(chromium.Eval[[]string](operator, `[...document.querySelectorAll('#site-table tbody tr.site')].map(r => r.dataset.site)`)).To(Equal(mine))

		By("their site's page, with its hosts")
		operator.Open(base, "/ui/sites/"+ns+"/"+mine[0])
		Expect(operator.Text(`tr.host[data-host="` + mine[0] + `-cp-0"]`)).To(ContainSubstring("provisioned"))

		By("another store's page answers 403")
		Expect(chromium.Eval[int](operator, `fetch('/ui/sites/`+ns+`/store-00003').then(r => r.status)`)).To(Equal(http.StatusForbidden))
		operator.Do(chromedp.Navigate(base + "/ui/sites/" + ns + "/store-00003"))
		operator.WaitFor("the denial", `document.body.textContent.includes('may not get sites.fleet.edgefleet.io "store-00003"')`)
	})

	It("shows a campaign's progress, and a site's patch step, live while it runs", func(ctx context.Context) {
		pct := func(v int) *intstr.IntOrString { i := intstr.FromInt32(int32(v)); return &i }
		camp := &fleetv1.Campaign{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: campaignName},
			Spec: fleetv1.CampaignSpec{
				Action: fleetv1.ActionPatch, Release: "r1",
				Targets: fleetv1.CampaignTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"chain": "stores"}}},
				Strategy: fleetv1.CampaignStrategy{Canaries: pct(1), MaxConcurrency: pct(1),
					FailureBudget: &fleetv1.FailureBudget{MaxFailures: intstr.FromInt32(1)}, SiteTimeout: &metav1.Duration{Duration: time.Hour}},
			},
		}
		siteTab := admin.NewTab()
		siteTab.Open(base, "/ui/sites/"+ns+"/"+stores[0])
		siteTab.MarkLoaded()

		Expect(fleet.Global.Client.Create(ctx, camp)).To(Succeed())
		By("the canary's page shows the BPA's step while it patches, without a reload")
		siteTab.WaitFor("the patch step", `(document.querySelector('#bootstrap-step')?.textContent ?? '').includes('on node `+stores[0]+`-cp-0')`)
		siteTab.Screenshot("site-patching")
		siteTab.WaitFor("the canary at r1", `document.querySelector('#cluster-version')?.textContent === 'v1.36.3'`)
		Expect(siteTab.StillLoaded()).To(BeTrue(), "the site page was reloaded")

		By("the campaign's page follows the progress, without a reload")
		admin.Open(base, "/ui/campaigns/"+ns+"/"+campaignName)
		admin.MarkLoaded()
		first := done(admin)
		admin.WaitFor("progress beyond "+strconv.Itoa(first), fmt.Sprintf(`parseInt(document.querySelector('#progress')?.textContent) > %d`, first))
		second := done(admin)
		admin.WaitFor("progress beyond "+strconv.Itoa(second), fmt.Sprintf(`parseInt(document.querySelector('#progress')?.textContent) > %d`, second))
		Expect(admin.StillLoaded()).To(BeTrue(), "the campaign page was reloaded")
		Expect(admin.Text("#phase")).To(Equal("Running"))
		Expect(admin.Count(`tr.wave.finished`)).To(BeNumerically(">=", 1))
		admin.Screenshot("campaign-running")

		By("the campaign list and the overview show it running")
		admin.Open(base, "/ui/campaigns?namespace="+ns)
		Expect(admin.Text(`tr.campaign[data-name="` + campaignName + `"]`)).To(And(ContainSubstring("patch"), ContainSubstring("r1"), ContainSubstring("Running")))
		admin.Open(base, "/ui/?namespace="+ns)
		Expect(admin.Text(`#running tr.campaign[data-name="` + campaignName + `"]`)).To(ContainSubstring("Running"))
		admin.Open(base, "/ui/campaigns/"+ns+"/"+campaignName)
	})

	It("pauses the campaign from the UI: nothing new is dispatched", func(ctx context.Context) {
		admin.Click("#pause")
		admin.WaitFor("the campaign Paused, with a resume button", `document.querySelector('#phase')?.textContent === 'Paused' && !!document.querySelector('#resume')`)
		Expect(campaign(ctx, campaignName).Spec.Paused).To(BeTrue())
		By("the site in flight finishes; then none is in flight and some wait")
		Eventually(func(g Gomega) {
			c := campaign(ctx, campaignName)
			g.Expect(c.Status.Phase).To(Equal(fleetv1.CampaignPaused))
			g.Expect(c.Status.Counts.InProgress).To(BeZero())
		}).WithContext(ctx).WithTimeout(chromium.PollTimeout).WithPolling(time.Second).Should(Succeed())
		pending := campaign(ctx, campaignName).Status.Counts.Pending
		Expect(pending).To(BeNumerically(">", 0), "the campaign finished before the pause took effect")
		Consistently(func() int32 { return campaign(ctx, campaignName).Status.Counts.Pending }).
			WithContext(ctx).WithTimeout(3 * workTime).WithPolling(time.Second).Should(Equal(pending))
		admin.WaitFor("the pending count", fmt.Sprintf(`document.querySelector('#count-pending')?.textContent === '%d'`, pending))
		admin.Screenshot("campaign-paused")
	})

	It("shows a fleet viewer no brakes, and refuses a viewer's forged resume with 403", func(ctx context.Context) {
		viewer := chromium.NewUser(browser, "viewer")
		viewer.SignIn(base, viewerToken)
		viewer.Open(base, "/ui/campaigns/"+ns+"/"+campaignName)
		Expect(viewer.Text("#phase")).To(Equal("Paused"))
		Expect(viewer.Count("#pause, #resume, #abort, #actions form")).To(BeZero(), "a viewer sees brakes")

		By("a resume posted from the viewer's page, as a forged button would")
		status := chromium.Eval[int](viewer, `fetch(location.pathname + '/resume', {method: 'POST'}).then(r => r.status)`)
		Expect(status).To(Equal(http.StatusForbidden))
		Expect(campaign(ctx, campaignName).Spec.Paused).To(BeTrue())

		By("an admin's resume sent from another site's page (Origin) is refused too")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/ui/campaigns/"+ns+"/"+campaignName+"/resume", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Origin", "https://attacker.example")
		req.AddCookie(&http.Cookie{Name: "edgefleet-token", Value: adminToken})
		resp, err := httpsClient().Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden))
		Expect(campaign(ctx, campaignName).Spec.Paused).To(BeTrue())
	})

	It("resumes the campaign from the UI and follows it to its end, naming the failed site and why", func(ctx context.Context) {
		admin.Open(base, "/ui/campaigns/"+ns+"/"+campaignName)
		admin.Click("#resume")
		Expect(campaign(ctx, campaignName).Spec.Paused).To(BeFalse())
		admin.MarkLoaded()
		admin.WaitFor("the campaign's end", `document.querySelector('#phase')?.textContent === 'PartiallySucceeded'`)
		Expect(admin.StillLoaded()).To(BeTrue(), "the campaign page was reloaded")
		Expect(admin.Text("#progress")).To(Equal("12/12"))
		Expect(admin.Text(`tr.failed-site[data-site="` + failing + `"]`)).To(ContainSubstring("simulated host failure"))
		Expect(admin.Count("#pause, #resume, #abort")).To(BeZero(), "brakes on an ended campaign")
		Expect(campaign(ctx, campaignName).Status.Phase).To(Equal(fleetv1.CampaignPartiallySucceeded))
		admin.Screenshot("campaign")

		By("the failed site's page: Degraded, why, and its operation history")
		admin.Click(`tr.failed-site[data-site="` + failing + `"] a`)
		Expect(admin.Text(".headline")).To(And(ContainSubstring("Degraded"), ContainSubstring("OperationFailed"), ContainSubstring("simulated host failure")))
		Expect(admin.Text("#operation-phase")).To(Equal("Failed"))
		Expect(admin.Text("#history")).To(And(ContainSubstring("OperationInProgress"), ContainSubstring("OperationFailed")))
	})

	It("shows a site cut off as Unreachable, not failed, while the rest of the page stays current", func(ctx context.Context) {
		admin.Open(base, "/ui/?namespace="+ns)
		admin.MarkLoaded()
		admin.WaitFor("the failed store as the only problem", `document.querySelector('[data-state="Degraded"] .count')?.textContent === '1' &&
			document.querySelector('[data-state="Unreachable"] .count')?.textContent === '0'`)

		By("killing far's API server, as a power cut would")
		Expect(fleet.Sites["far"].KillAPIServer()).To(Succeed())
		admin.WaitFor(far+" Unreachable, and still one Degraded", fmt.Sprintf(`document.querySelector('[data-state="Unreachable"] .count')?.textContent === '1' &&
			document.querySelector('[data-state="Degraded"] .count')?.textContent === '1' &&
			(document.querySelector('tr.problem[data-site="%s"]')?.textContent ?? '').includes('Unreachable')`, far))

		By("registering another store: the overview counts it, still without a reload")
		_, err := fleet.RegisterSimulatedSites(ctx, fleet.Sites["sim"], ns, "late", 1, "r1", nil)
		Expect(err).NotTo(HaveOccurred())
		admin.WaitFor("14 sites, the new one Ready", `document.querySelector('#total')?.textContent === '14' &&
			document.querySelector('[data-state="Ready"] .count')?.textContent === '12'`)
		Expect(admin.StillLoaded()).To(BeTrue(), "the overview was reloaded")
		Expect(admin.Text(`[data-state="Unreachable"] .count`)).To(Equal("1"))
		admin.Screenshot("overview-unreachable")

		By("the site's own page says so, and keeps its last report")
		admin.Open(base, "/ui/sites/"+ns+"/"+far)
		Expect(admin.Text(".headline")).To(ContainSubstring("Unreachable"))
		Expect(admin.Text("#cluster")).To(ContainSubstring("as last reported"))
		admin.Open(base, "/ui/sites?namespace="+ns+"&state=Unreachable")
		Expect(admin.Count("#site-table tbody tr.site")).To(Equal(1))
		Expect(admin.Text(`tr.site[data-site="` + far + `"]`)).To(ContainSubstring("Unreachable"))
	})

	It("shows a site's local controller logs to who may read them, following new lines; others get 403, an unreachable site an error", func(ctx context.Context) {
		mark := fmt.Sprintf("ui-e2e-%d", time.Now().UnixNano())
		simLog.Info("distinctive line <b>"+mark+"</b>", uberzap.String("site", "store-00001"), uberzap.Int("attempt", 3))

		By("the admin shows the local controller's lines on a store's page")
		admin := chromium.NewUser(browser, "admin reading logs") // signed in here: the spec also runs alone
		admin.SignIn(base, adminToken)
		admin.Open(base, "/ui/sites/"+ns+"/store-00001")
		admin.Click0("#log-show")
		admin.WaitFor("the distinctive line, rendered", fmt.Sprintf(`[...document.querySelectorAll('#log-lines-shown .log-line')].some(l =>
			/^\d{4}-\d\d-\d\dT[\d:.]+Z INFO sim distinctive line <b>%s<\/b> site=store-00001 attempt=3$/.test(l.textContent))`, mark))
		Expect(admin.Count("#log-lines-shown b")).To(BeZero(), "a log line's markup was rendered")
		admin.Screenshot("site-logs")

		By("following: a line logged after the panel opened is appended, once")
		admin.Click0("#log-follow")
		simLog.Info("followed line " + mark)
		admin.WaitFor("the followed line", fmt.Sprintf(`[...document.querySelectorAll('#log-lines-shown .log-line')].some(l => l.textContent.includes('followed line %s'))`, mark))
		Expect(chromium.Eval[int](admin, fmt.Sprintf(`[...document.querySelectorAll('#log-lines-shown .log-line')].filter(l => l.textContent.includes('distinctive line <b>%s')).length`, mark))).To(Equal(1))
		admin.Click0("#log-follow")

		By("a site operator of far only gets 403 on a store's log route")
		operator := chromium.NewUser(browser, "far's operator")
		operator.SignIn(base, siteOperatorToken(ctx, "far-operator", []string{far}))
		Expect(chromium.Eval[int](operator, `fetch('/ui/sites/`+ns+`/store-00001/log').then(r => r.status)`)).To(Equal(http.StatusForbidden))

		By("a viewer of far, cut off, sees why in the panel")
		site := &fleetv1.Site{}
		Expect(fleet.Global.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: far}, site)).To(Succeed())
		if !apimeta.IsStatusConditionFalse(site.Status.Conditions, fleetv1.SiteReachableCondition) {
			Expect(fleet.Sites["far"].KillAPIServer()).To(Succeed()) // this spec runs alone
		}
		viewer := chromium.NewUser(browser, "viewer")
		viewer.SignIn(base, viewerToken)
		viewer.Open(base, "/ui/sites/"+ns+"/"+far)
		viewer.Click0("#log-show")
		viewer.WaitFor("the error, with the server's message", `document.querySelector('#log-status.error')?.textContent.includes('Cannot show the logs: site `+ns+`/`+far+`')`)
		Expect(viewer.Count("#log-lines-shown .log-line")).To(BeZero())
		viewer.Screenshot("site-logs-unreachable")
	})
})

// done is the number of finished sites the campaign page shows.
func done(u *chromium.User) int {
	GinkgoHelper()
	return chromium.Eval[int](u, `parseInt(document.querySelector('#progress')?.textContent) || 0`)
}
