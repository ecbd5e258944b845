package setup

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func TestValidateNamesTheBadFlag(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Options)
		flag   string
	}{
		{"defaults are valid", func(*Options) {}, ""},
		{"HTTPS off loopback", func(o *Options) {
			o.APIAddr = ":8443"
			o.APITLSCertFile, o.APITLSKeyFile = "/tls/tls.crt", "/tls/tls.key"
		}, ""},
		{"external MongoDB needs no data dir", func(o *Options) { o.DataDir = ""; o.MongoURI = "mongodb://db:27017" }, ""},
		{"zero heartbeat", func(o *Options) { o.SiteHeartbeat = 0 }, "--site-heartbeat-interval"},
		{"a retry period as long as the renew deadline", func(o *Options) { o.Election.RetryPeriod = o.Election.RenewDeadline }, "--leader-elect-retry-period"},
		{"retry longer than heartbeat", func(o *Options) { o.SiteMinRetry = 2 * time.Minute }, "--site-min-retry-interval"},
		{"zero operation poll", func(o *Options) { o.OperationPoll = 0 }, "--site-operation-poll-interval"},
		{"negative timeout", func(o *Options) { o.SiteTimeout = -time.Second }, "--site-timeout"},
		{"zero kubeconfig lifetime", func(o *Options) { o.MaxKubeconfigTTL = 0 }, "--max-kubeconfig-ttl"},
		{"zero site log wait", func(o *Options) { o.SiteLogWait = 0 }, "--site-log-wait"},
		{"no workers", func(o *Options) { o.Concurrency = 0 }, "--concurrency"},
		{"plain HTTP API off loopback", func(o *Options) { o.APIAddr = ":8443" }, "--api-tls-cert-file"},
		{"certificate without key", func(o *Options) { o.APITLSCertFile = "/tls/tls.crt" }, "--api-tls-key-file"},
		{"no data dir for embedded FerretDB", func(o *Options) { o.DataDir = "" }, "--data-dir"},
		{"zero upload TTL", func(o *Options) { o.UploadTTL = 0 }, "--upload-ttl"},
		{"zero body read timeout", func(o *Options) { o.APIBodyReadTimeout = 0 }, "--api-body-read-timeout"},
		{"transfer memory below the minimum", func(o *Options) { o.APITransferMemory = 1 << 20 }, "--api-transfer-memory"},
		{"no artifact size", func(o *Options) { o.MaxArtifactSize = 0 }, "--max-artifact-size"},
		{"no space reserve", func(o *Options) { o.ArtifactSpaceReserve = 0 }, "--artifact-space-reserve"},
		{"no campaign workers", func(o *Options) { o.CampaignConcurrency = 0 }, "--campaign-concurrency"},
		{"no dispatch workers", func(o *Options) { o.CampaignDispatchConcurrency = 0 }, "--campaign-dispatch-concurrency"},
		{"zero resync", func(o *Options) { o.CampaignResync = 0 }, "--campaign-resync-interval"},
		{"negative QPS", func(o *Options) { o.KubeAPIQPS = -1 }, "--kube-api-qps"},
		{"zero status report", func(o *Options) { o.SiteStatusReport = 0 }, "--site-status-report-interval"},
		{"no operation polls", func(o *Options) { o.OperationPollRate = 0 }, "--site-operation-poll-rate"},
		{"webhooks without the store", func(o *Options) { o.WebhookPort = 9443; o.WebhookCertDir = "/tls"; o.APIAddr = "0" }, "--webhook-port"},
		{"webhooks without certificates", func(o *Options) { o.WebhookPort = 9443 }, "--webhook-cert-dir"},
		{"unknown Istio mode", func(o *Options) { o.Istio = "yes" }, "--istio"},
		{"no mesh policy namespace", func(o *Options) { o.IstioNamespace = "" }, "--istio-namespace"},
		{"a service account name for a principal", func(o *Options) { o.IstioAPIPrincipals = []string{"edgefleet-cli"} }, "--istio-api-principals"},
		{"a bad webhook source range", func(o *Options) {
			o.WebhookPort, o.WebhookCertDir = 9443, "/tls"
			o.IstioWebhookSourceRanges = []string{"10.0.0.0/99"}
		}, "--istio-webhook-source-ranges"},
		{"enrollment tokens of seconds", func(o *Options) { o.EnrollmentTokenTTL = 30 * time.Second }, "--enrollment-token-ttl"},
		{"enrollment token default above the maximum", func(o *Options) { o.EnrollmentTokenMaxTTL = time.Hour }, "--enrollment-token-max-ttl"},
		{"enrollment tokens without attempts", func(o *Options) { o.EnrollmentTokenMaxFailures = 0 }, "--enrollment-token-max-failures"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.mutate(&o)
			err := o.Validate()
			if tt.flag == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.flag) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.flag)
			}
		})
	}
}

func TestEnrollmentAllowedNetworksFlag(t *testing.T) {
	o := DefaultOptions()
	if len(o.EnrollmentAllowedNetworks) != 0 {
		t.Fatalf("allowed by default: %v", o.EnrollmentAllowedNetworks)
	}
	fs := flag.NewFlagSet("global-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--enrollment-allowed-networks", "127.0.0.0/8,::1/128"}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(o.EnrollmentAllowedNetworks); got != "[127.0.0.0/8 ::1/128]" {
		t.Errorf("allowed networks %s", got)
	}
	fs = flag.NewFlagSet("global-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	err := fs.Parse([]string{"--enrollment-allowed-networks", "127.0.0.0/8,127.0.0.1"})
	if err == nil || !strings.Contains(err.Error(), "enrollment-allowed-networks") || !strings.Contains(err.Error(), `"127.0.0.1" is not a CIDR`) {
		t.Errorf("a bare address: %v, want an error naming the flag and the item", err)
	}
}
