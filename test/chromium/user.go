package chromium

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// PollTimeout bounds every wait for the page to show something.
const PollTimeout = 2 * time.Minute

// User is a browser context of its own (its own cookies), signed in as one person.
type User struct {
	Name string
	Tab  context.Context
}

// NewUser opens a browser context of its own in browser.
func NewUser(browser context.Context, name string) *User {
	tab, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ginkgo.DeferCleanup(cancel)
	gomega.Expect(chromedp.Do(tab)).To(gomega.Succeed())
	return &User{Name: name, Tab: tab}
}

// NewTab opens another tab of the same user (same cookies).
func (u *User) NewTab() *User {
	tab, cancel := chromedp.NewContext(u.Tab)
	ginkgo.DeferCleanup(cancel)
	gomega.Expect(chromedp.Do(tab)).To(gomega.Succeed())
	return &User{Name: u.Name, Tab: tab}
}

// Do runs browser actions, all together bounded by PollTimeout.
func (u *User) Do(actions ...chromedp.Action[chromedp.Void]) {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.Tab, PollTimeout)
	defer cancel()
	gomega.Expect(chromedp.Do(ctx, actions...)).To(gomega.Succeed(), "browser of %s", u.Name)
}

// SignIn signs in on the login page with token, and waits for the overview.
func (u *User) SignIn(baseURL, token string) {
	ginkgo.GinkgoHelper()
	u.Do(chromedp.Navigate(baseURL + "/ui/login"))
	u.SubmitToken(token)
	u.Do(chromedp.WaitVisible(chromedp.CSS("#live")))
}

// SubmitToken fills the login form with token and sends it.
func (u *User) SubmitToken(token string) {
	ginkgo.GinkgoHelper()
	u.Do(chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SetValue(chromedp.CSS("#token"), token))
	u.Click("#sign-in")
}

// Open navigates to path and waits for its live part.
func (u *User) Open(baseURL, path string) {
	ginkgo.GinkgoHelper()
	u.Do(chromedp.Navigate(baseURL+path), chromedp.WaitVisible(chromedp.CSS("#live")))
}

// Click clicks the element sel matches, a link or a form's button, and waits until the page
// it leads to has loaded. A live update may replace the element between finding and clicking
// it (the site list's pager is redrawn with the table): the click is then tried again, on the
// new element, within the same deadline.
func (u *User) Click(sel string) {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.Tab, PollTimeout)
	defer cancel()
	_, err := RunReplaced(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel))))
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "browser of %s: click %s", u.Name, sel)
}

// Click0 clicks the element sel matches that changes the page without loading another (a
// script's button or checkbox), again on the new element when a live update replaced it.
func (u *User) Click0(sel string) {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.Tab, PollTimeout)
	defer cancel()
	_, err := RunReplaced(ctx, chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel))))
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "browser of %s: click %s", u.Name, sel)
}

// Text is the text of the first element sel matches.
func (u *User) Text(sel string) string {
	ginkgo.GinkgoHelper()
	return Eval[string](u, fmt.Sprintf("document.querySelector(%q)?.textContent.trim() ?? ''", sel))
}

// Eval evaluates a JavaScript expression on u's page, awaiting a promise.
func Eval[T any](u *User, js string) T {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.Tab, PollTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "browser of %s: %s", u.Name, js)
	return v
}

// WaitFor waits until the JavaScript expression is true on the page, and fails saying what
// the page shows when it never is.
func (u *User) WaitFor(what, js string) {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithTimeout(u.Tab, PollTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(PollTimeout))); err != nil {
		body, _ := chromedp.Run(u.Tab, chromedp.Evaluate[string]("document.querySelector('main')?.innerText ?? document.body.innerText"))
		ginkgo.Fail(fmt.Sprintf("%s: the page never showed %s (%v); it shows:\n%s", u.Name, what, err, body))
	}
}

// Count is how many elements sel matches.
func (u *User) Count(sel string) int {
	ginkgo.GinkgoHelper()
	return Eval[int](u, fmt.Sprintf("document.querySelectorAll(%q).length", sel))
}

// MarkLoaded marks the loaded document: the mark survives live updates and goes with a
// reload or a navigation.
func (u *User) MarkLoaded() {
	ginkgo.GinkgoHelper()
	Eval[bool](u, "window.__loadedOnce = true")
}

// StillLoaded reports whether the document MarkLoaded marked is still the one shown.
func (u *User) StillLoaded() bool {
	ginkgo.GinkgoHelper()
	return Eval[bool](u, "window.__loadedOnce === true")
}

// Cookies are the browser's cookies for url.
func (u *User) Cookies(url string) []*network.Cookie {
	ginkgo.GinkgoHelper()
	res, err := chromedp.Call(u.Tab, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return res.Cookies
}

// Screenshot saves the page as name.png in $EDGEFLEET_UI_SCREENSHOTS (docs/ui for docs/ui.md),
// when it is set.
func (u *User) Screenshot(name string) {
	ginkgo.GinkgoHelper()
	dir := os.Getenv("EDGEFLEET_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(u.Tab, chromedp.FullScreenshot(100)) // 100: PNG
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)).To(gomega.Succeed())
}
