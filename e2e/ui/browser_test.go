package ui_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/edgefleet/edgefleet/test/chromium"
)

// startBrowser starts headless Chromium (chromium.StartChromium) trusting the artifact API's
// certificate (caFile). It is stopped when the suite ends.
func startBrowser(caFile string) context.Context {
	browser, err := chromium.StartChromium(GinkgoTB(), caFile)
	Expect(err).NotTo(HaveOccurred())
	return browser
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
