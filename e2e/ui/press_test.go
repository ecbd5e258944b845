package ui_test

import (
	"context"
	"fmt"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/chromium"
)

// countUpdates runs before the page's scripts: it counts in window.__updates the update events
// of the page's stream and keeps the newest in window.__lastUpdate. Its listener is the
// stream's first and one dispatch runs them all at once, so when it has counted an update,
// ui.js has handled that update too.
const countUpdates = `(() => {
  const Source = window.EventSource;
  window.__updates = 0;
  window.EventSource = class extends Source {
    constructor(...args) {
      super(...args);
      this.addEventListener('update', (e) => { window.__updates++; window.__lastUpdate = e.data; });
    }
  };
})();`

// A click is the press and the release on the same element. An update that replaced the live
// part in between would send the click to an ancestor instead (the row's button lost it, as
// in CI's real-hosts run): the script holds updates back while a pointer is pressed on it.
var _ = Describe("A press on the live part", func() {
	It("is not lost when an update arrives before the release", func(ctx context.Context) {
		const clicks = "clicks" // a namespace of its own: the other checks never see its sites

		By("opening My clusters of a cluster user on a namespace with one site")
		Expect(fleet.Global.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clicks}})).To(Succeed())
		createClusterSite(ctx, clicks, "click-a")
		token, err := fleet.Token(ctx, "edgefleet-system", "ui-cluster-user", "edgefleet-cluster-user")
		Expect(err).NotTo(HaveOccurred())
		carol := chromium.NewUser(browser, "cluster user")
		_, err = chromedp.Call(carol.Tab, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: countUpdates})
		Expect(err).NotTo(HaveOccurred())
		carol.Do(chromedp.Navigate(base + "/ui/clusters?namespace=" + clicks))
		carol.SubmitToken(token)
		const button = `tr.cluster[data-name="click-a"] button[data-kubeconfig]`
		carol.WaitFor("click-a's button, and the stream's first update", fmt.Sprintf(`!!document.querySelector('%s') && window.__updates >= 1`, button))

		By("pressing click-a's button, registering click-b meanwhile, releasing once the page has its update")
		at := chromium.Eval[[]float64](carol, fmt.Sprintf(`(() => {
			const r = document.querySelector('%s').getBoundingClientRect();
			return [r.x + r.width / 2, r.y + r.height / 2];
		})()`, button))
		x, y := at[0], at[1]
		pressed := func(p *input.DispatchMouseEventParams) { p.Buttons = 1 }
		carol.Do(chromedp.MouseEvent(chromedp.MousePressed, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1), pressed))
		createClusterSite(ctx, clicks, "click-b")
		carol.WaitFor("the update with click-b handled by the page's script", `(window.__lastUpdate ?? '').includes('click-b')`)
		carol.Do(chromedp.MouseEvent(chromedp.MouseReleased, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
		carol.WaitFor("the kubeconfig button's status (the click reached it)", `document.querySelector('#kubeconfig-status').textContent !== ''`)

		By("the update held back meanwhile is shown after the release")
		carol.WaitFor("click-b's row", `!!document.querySelector('tr.cluster[data-name="click-b"]')`)
	})
})

// createClusterSite creates Site ns/name with an application cluster, which My clusters lists.
// No site answers for it (its kubeconfig Secret does not exist), nor does it need to: the
// kubeconfig button shows its status at once, and then the error.
func createClusterSite(ctx context.Context, ns, name string) {
	GinkgoHelper()
	site := &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1.SiteSpec{
			KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: name + "-kubeconfig"},
			Cluster: &fleetv1.SiteCluster{Network: sitev1.ClusterNetwork{
				PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
				ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "192.0.2.1"},
			}},
		},
	}
	Expect(fleet.Global.Client.Create(ctx, site)).To(Succeed())
}
