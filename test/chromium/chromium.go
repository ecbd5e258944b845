package chromium

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Chromium is Debian's package, installed by hack/tools.sh (make tools).
const Chromium = "/usr/bin/chromium"

// StartChromium starts headless Chromium with a fresh profile and no network of its own, and
// returns its browser context. With certFile, it trusts that server certificate by its public
// key alone (the test bed's HTTPS servers have no CA a browser knows). The browser is stopped
// when the test ends.
func StartChromium(t testing.TB, certFile string) (context.Context, error) {
	if _, err := os.Stat(Chromium); err != nil {
		return nil, fmt.Errorf("debian's chromium is missing: run hack/tools.sh chromium (make tools): %w", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	}
	if certFile != "" {
		spki, err := SPKIHash(certFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", spki))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelBrowser() // closes the browser
		cancelAlloc()   // kills the process
	})
	if err := chromedp.Do(browser); err != nil {
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	return browser, nil
}

// SPKIHash is what Chromium's --ignore-certificate-errors-spki-list takes: the base64 SHA-256
// of the public key of the first certificate in certFile.
func SPKIHash(certFile string) (string, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return "", errors.New("no PEM block in " + certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// RunReplaced runs action in the browser tab ctx (chromedp.Steps joins several), and again
// while it met an element the page's live updates replaced after it was found (chromedp: "Could
// not find node with given id"): the next try finds the new element. It gives up when ctx is
// done.
func RunReplaced[T any](ctx context.Context, action chromedp.Action[T]) (T, error) {
	for {
		v, err := chromedp.Run(ctx, action)
		if err == nil || !strings.Contains(err.Error(), "Could not find node with given id") || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
