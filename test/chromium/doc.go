// Package chromium runs Debian's headless Chromium for the web UI's browser tests
// (StartChromium, with chromedp), trusting one server certificate by its public key (SPKIHash),
// and RunReplaced runs a chromedp action that may replace the page it started on.
package chromium
