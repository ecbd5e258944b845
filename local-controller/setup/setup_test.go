package setup

import (
	"strings"
	"testing"
)

func TestValidateNamesTheBadFlag(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Options)
		flag    string
		wantURL string
	}{
		{"defaults with a cache URL", func(*Options) {}, "", "http://10.0.0.2:8180"},
		{"cache URL from a bind address with a host", func(o *Options) { o.CacheURL, o.CacheAddr = "", "10.0.0.3:8180" }, "", "https://10.0.0.3:8180"},
		{"plain HTTP cache URL from a loopback bind address", func(o *Options) {
			o.CacheURL, o.CacheAddr, o.CacheTLSCertFile, o.CacheTLSKeyFile, o.CacheClientCAFile = "", "127.0.0.1:8180", "", "", ""
		}, "", "http://127.0.0.1:8180"},
		{"plain HTTP off loopback", func(o *Options) { o.CacheTLSCertFile, o.CacheTLSKeyFile, o.CacheClientCAFile = "", "", "" }, "--cache-tls-cert-file", ""},
		{"a certificate without its key", func(o *Options) { o.CacheTLSKeyFile = "" }, "--cache-tls-key-file", ""},
		{"a client CA without TLS", func(o *Options) { o.CacheAddr, o.CacheTLSCertFile, o.CacheTLSKeyFile = "127.0.0.1:8180", "", "" }, "--cache-client-ca-file", ""},
		{"bind address without a host", func(o *Options) { o.CacheURL = "" }, "--cache-url", ""},
		{"bind address on every interface", func(o *Options) { o.CacheURL, o.CacheAddr = "", "0.0.0.0:8180" }, "--cache-url", ""},
		{"cache URL not http", func(o *Options) { o.CacheURL = "ftp://10.0.0.2" }, "--cache-url", ""},
		{"no namespace", func(o *Options) { o.Namespace = "" }, "--namespace", ""},
		{"a renew deadline as long as the lease", func(o *Options) { o.Election.RenewDeadline = o.Election.LeaseDuration }, "--leader-elect-lease-duration", ""},
		{"no cache dir", func(o *Options) { o.CacheDir = "" }, "--cache-dir", ""},
		{"zero verify interval", func(o *Options) { o.CacheVerifyInterval = 0 }, "--cache-verify-interval", ""},
		{"negative retries", func(o *Options) { o.FetchRetries = -1 }, "--fetch-retries", ""},
		{"no workers", func(o *Options) { o.Concurrency = 0 }, "--concurrency", ""},
		{"unknown Istio mode", func(o *Options) { o.Istio = "yes" }, "--istio", ""},
		{"a service account name for a principal", func(o *Options) { o.IstioCachePrincipals = []string{"edgefleet-bpa"} }, "--istio-cache-principals", ""},
		{"a bad cache source range", func(o *Options) { o.IstioCacheSourceRanges = []string{"provisioning"} }, "--istio-cache-source-ranges", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.CacheURL = "http://10.0.0.2:8180"
			o.CacheTLSCertFile, o.CacheTLSKeyFile, o.CacheClientCAFile = "/pki/site-cache.crt", "/pki/site-cache.key", "/pki/ca.crt"
			tt.mutate(&o)
			err := o.Validate()
			if tt.flag == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if o.CacheURL != tt.wantURL {
					t.Fatalf("CacheURL = %q, want %q", o.CacheURL, tt.wantURL)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.flag) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.flag)
			}
		})
	}
}
