package ui_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/edgefleet/edgefleet/test/chromium"
)

// pollTimeout bounds every wait for the page to show something.
const pollTimeout = 2 * time.Minute

// startBrowser starts headless Chromium (chromium.StartChromium) trusting the artifact API's
// certificate (caFile). It is stopped when the suite ends.
func startBrowser(caFile string) context.Context {
	browser, err := chromium.StartChromium(GinkgoTB(), caFile)
	Expect(err).NotTo(HaveOccurred())
	return browser
}

// user is a browser context of its own (its own cookies), signed in as one person.
type user struct {
	name string
	tab  context.Context
}

// newUser opens a browser context of its own in browser.
func newUser(browser context.Context, name string) *user {
	tab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	DeferCleanup(cancel)
	Expect(chromedp.Do(tab)).To(Succeed())
	return &user{name: name, tab: tab}
}

// newTab opens another tab of the same user (same cookies).
func (u *user) newTab() *user {
	tab, cancel := chromedp.NewContext(u.tab)
	DeferCleanup(cancel)
	Expect(chromedp.Do(tab)).To(Succeed())
	return &user{name: u.name, tab: tab}
}

// do runs browser actions, all together bounded by pollTimeout.
func (u *user) do(actions ...chromedp.Action[chromedp.Void]) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.tab, pollTimeout)
	defer cancel()
	Expect(chromedp.Do(ctx, actions...)).To(Succeed(), "browser of %s", u.name)
}

// signIn signs in on the login page with token, and waits for the overview.
func (u *user) signIn(baseURL, token string) {
	GinkgoHelper()
	u.do(chromedp.Navigate(baseURL + "/ui/login"))
	u.submitToken(token)
	u.do(chromedp.WaitVisible(chromedp.CSS("#live")))
}

// submitToken fills the login form with token and sends it.
func (u *user) submitToken(token string) {
	GinkgoHelper()
	u.do(chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SetValue(chromedp.CSS("#token"), token))
	u.click("#sign-in")
}

// open navigates to path and waits for its live part.
func (u *user) open(baseURL, path string) {
	GinkgoHelper()
	u.do(chromedp.Navigate(baseURL+path), chromedp.WaitVisible(chromedp.CSS("#live")))
}

// click clicks the element sel matches, a link or a form's button, and waits until the page
// it leads to has loaded. A live update may replace the element between finding and clicking
// it (the site list's pager is redrawn with the table): the click is then tried again, on the
// new element, within the same deadline.
func (u *user) click(sel string) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.tab, pollTimeout)
	defer cancel()
	_, err := chromium.RunReplaced(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel))))
	Expect(err).NotTo(HaveOccurred(), "browser of %s: click %s", u.name, sel)
}

// click0 clicks the element sel matches that changes the page without loading another (a
// script's button or checkbox), again on the new element when a live update replaced it.
func (u *user) click0(sel string) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.tab, pollTimeout)
	defer cancel()
	_, err := chromium.RunReplaced(ctx, chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel))))
	Expect(err).NotTo(HaveOccurred(), "browser of %s: click %s", u.name, sel)
}

// httpsClient is an HTTP client that trusts the artifact API's certificate and does not
// follow redirects.
func httpsClient() *http.Client {
	GinkgoHelper()
	ca, err := os.ReadFile(fleet.APICAFile)
	Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
	return &http.Client{
		Timeout:       30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// text is the text of the first element sel matches.
func (u *user) text(sel string) string {
	GinkgoHelper()
	return eval[string](u, fmt.Sprintf("document.querySelector(%q)?.textContent.trim() ?? ''", sel))
}

// eval evaluates a JavaScript expression on u's page, awaiting a promise.
func eval[T any](u *user, js string) T {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.tab, pollTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	Expect(err).NotTo(HaveOccurred(), "browser of %s: %s", u.name, js)
	return v
}

// waitFor waits until the JavaScript expression is true on the page, and fails saying what
// the page shows when it never is.
func (u *user) waitFor(what, js string) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.tab, pollTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(pollTimeout))); err != nil {
		body, _ := chromedp.Run(u.tab, chromedp.Evaluate[string]("document.querySelector('main')?.innerText ?? document.body.innerText"))
		Fail(fmt.Sprintf("%s: the page never showed %s (%v); it shows:\n%s", u.name, what, err, body))
	}
}

// count is how many elements sel matches.
func (u *user) count(sel string) int {
	GinkgoHelper()
	return eval[int](u, fmt.Sprintf("document.querySelectorAll(%q).length", sel))
}

// markLoaded marks the loaded document: the mark survives live updates and goes with a
// reload or a navigation.
func (u *user) markLoaded() {
	GinkgoHelper()
	eval[bool](u, "window.__loadedOnce = true")
}

// stillLoaded reports whether the document markLoaded marked is still the one shown.
func (u *user) stillLoaded() bool {
	GinkgoHelper()
	return eval[bool](u, "window.__loadedOnce === true")
}

// cookies are the browser's cookies for url.
func (u *user) cookies(url string) []*network.Cookie {
	GinkgoHelper()
	res, err := chromedp.Call(u.tab, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	Expect(err).NotTo(HaveOccurred())
	return res.Cookies
}

// screenshot saves the page as name.png in $EDGEFLEET_UI_SCREENSHOTS (docs/ui for docs/ui.md),
// when it is set.
func (u *user) screenshot(name string) {
	GinkgoHelper()
	dir := os.Getenv("EDGEFLEET_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(u.tab, chromedp.FullScreenshot(100)) // 100: PNG
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)).To(Succeed())
}
