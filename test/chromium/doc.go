// Package chromium runs Debian's headless Chromium for the web UI's browser tests
// (StartChromium, with chromedp), trusting one server certificate by its public key (SPKIHash);
// RunReplaced runs a chromedp action that may replace the page it started on. User is one
// person's browser context in a ginkgo suite: signing in, opening pages, clicking, reading and
// waiting for what the page shows, every wait bounded by PollTimeout.
package chromium
