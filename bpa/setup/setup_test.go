package setup

import (
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/pkg/vaultauth"
)

func TestValidateNamesTheBadFlag(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Options)
		flag   string
	}{
		{"defaults", func(*Options) {}, ""},
		{"with Vault", func(o *Options) { o.Vault.Addr, o.Vault.Role = "https://vault.site:8200", "bpa-site-a" }, ""},
		{"Vault without a role", func(o *Options) { o.Vault.Addr = "https://vault.site:8200" }, "--vault-role"},
		{"Vault with a static token", func(o *Options) { o.Vault.Addr, o.Vault.Method = "https://vault.site:8200", vaultauth.MethodToken }, ""},
		{"Vault with an unknown method", func(o *Options) { o.Vault.Addr, o.Vault.Method = "https://vault.site:8200", "approle" }, "--vault-auth"},
		{"no namespace", func(o *Options) { o.Namespace = "" }, "--namespace"},
		{"a renew deadline as long as the lease", func(o *Options) { o.Election.RenewDeadline = o.Election.LeaseDuration }, "--leader-elect-lease-duration"},
		{"Vault without a mount", func(o *Options) {
			o.Vault.Addr, o.Vault.Role, o.VaultMount = "https://vault.site:8200", "bpa-site-a", ""
		}, "--vault-mount"},
		{"cluster KMS", func(o *Options) {
			o.Vault.Addr, o.Vault.Role = "https://vault.site:8200", "bpa-site-a"
			o.ClusterKMS.VaultAddr, o.ClusterKMSCAFile = "https://10.0.0.1:8200", "/etc/edgefleet/vault-ca.crt"
		}, ""},
		{"cluster KMS without Vault", func(o *Options) {
			o.ClusterKMS.VaultAddr, o.ClusterKMSCAFile = "https://10.0.0.1:8200", "/etc/edgefleet/vault-ca.crt"
		}, "--cluster-kms-vault-addr needs --vault-addr"},
		{"cluster KMS without a CA", func(o *Options) {
			o.Vault.Addr, o.Vault.Role = "https://vault.site:8200", "bpa-site-a"
			o.ClusterKMS.VaultAddr = "https://10.0.0.1:8200"
		}, "--cluster-kms-vault-ca-file"},
		{"no SSH parallelism", func(o *Options) { o.SSHParallelism = 0 }, "--ssh-parallelism"},
		{"zero SSH timeout", func(o *Options) { o.SSHTimeout = 0 }, "--ssh-timeout"},
		{"zero retry", func(o *Options) { o.Retry = 0 }, "--retry-interval"},
		{"negative resync", func(o *Options) { o.Resync = -1 }, "--resync-interval"},
		{"zero credential lifetime", func(o *Options) { o.MaxCredentialTTL = 0 }, "--max-credential-ttl"},
		{"short certificates for a test", func(o *Options) {
			o.Certificates.Validity, o.Certificates.RenewBefore, o.Resync = 6*time.Minute, 3*time.Minute, time.Minute
		}, ""},
		{"certificates of seconds", func(o *Options) { o.Certificates.Validity = 30 * time.Second }, "--certificate-validity"},
		{"renewal window as long as the lifetime", func(o *Options) { o.Certificates.RenewBefore = o.Certificates.Validity }, "--certificate-renew-before"},
		{"renewal window shorter than a pass", func(o *Options) {
			o.Certificates.Validity, o.Certificates.RenewBefore = time.Hour, 5*time.Minute
		}, "--resync-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Vault.Addr = ""
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
