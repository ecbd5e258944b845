package v1alpha1_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/edgefleet/edgefleet/api/fleet/v1alpha1"
	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
)

// global is a real API server with the CRDs of deploy/crds installed; the tests check that it
// applies their OpenAPI and CEL rules.
var global *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.Run(m, controlplane.Options{Name: "global", InstallCRDs: true}, func(_ context.Context, cp *controlplane.ControlPlane) error {
		global = cp
		return nil
	}))
}

func validSite(ns string) *fleetv1.Site {
	return &fleetv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-0042"},
		Spec: fleetv1.SiteSpec{
			KubeconfigSecretRef: &fleetv1.SecretKeyReference{Name: "store-0042-kubeconfig"},
			BPAEndpoint:         "https://bpa.store-0042.example:8443",
			Location:            &fleetv1.Location{Region: "eu-west", Latitude: "48.8566", Longitude: "2.3522"},
			MaintenanceWindows: []fleetv1.MaintenanceWindow{
				{Schedule: "0 2 * * 6", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Paris"},
			},
		},
	}
}

func validHost(ns string) *fleetv1.Host {
	return &fleetv1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-0042-cp-0"},
		Spec: fleetv1.HostSpec{
			SiteRef:        fleetv1.SiteReference{Name: "store-0042"},
			Role:           fleetv1.RoleControlPlane,
			BootMACAddress: "52:54:00:AB:cd:01",
			BMC: fleetv1.BMCDetails{
				Address:              "redfish-virtualmedia://10.0.0.5/redfish/v1/Systems/1",
				CredentialsSecretRef: &fleetv1.SecretReference{Name: "store-0042-cp-0-bmc"},
			},
			RootDeviceHints: &fleetv1.RootDeviceHints{DeviceName: "/dev/sda"},
		},
	}
}

func TestValidObjectsAreAccepted(t *testing.T) {
	ns := global.Namespace(t)
	site := validSite(ns)
	if err := global.Client.Create(t.Context(), site); err != nil {
		t.Fatalf("valid site rejected: %v", err)
	}
	if site.Spec.KubeconfigSecretRef.Key != "kubeconfig" {
		t.Errorf("spec.kubeconfigSecretRef.key defaulted to %q, want \"kubeconfig\"", site.Spec.KubeconfigSecretRef.Key)
	}
	if err := global.Client.Create(t.Context(), validHost(ns)); err != nil {
		t.Fatalf("valid host rejected: %v", err)
	}
	// The kubeconfig and the BMC credentials in Vault instead of Secrets.
	vaultSite := mutateSite(ns, func(s *fleetv1.Site) {
		s.Name = "store-0043"
		s.Spec.KubeconfigSecretRef, s.Spec.KubeconfigVaultRef = nil, &fleetv1.VaultKeyReference{Path: "sites/store-0043"}
	})
	if err := global.Client.Create(t.Context(), vaultSite); err != nil {
		t.Fatalf("valid site with its kubeconfig in Vault rejected: %v", err)
	}
	if vaultSite.Spec.KubeconfigVaultRef.Key != "kubeconfig" {
		t.Errorf("spec.kubeconfigVaultRef.key defaulted to %q, want \"kubeconfig\"", vaultSite.Spec.KubeconfigVaultRef.Key)
	}
	vaultHost := mutateHost(ns, func(h *fleetv1.Host) {
		h.Name, h.Spec.BootMACAddress = "store-0043-cp-0", "52:54:00:AB:cd:02"
		h.Spec.BMC.CredentialsSecretRef, h.Spec.BMC.CredentialsVaultRef = nil, &fleetv1.VaultReference{Path: "bmc/store-0043_cp-0.v1"}
	})
	if err := global.Client.Create(t.Context(), vaultHost); err != nil {
		t.Fatalf("valid host with its BMC credentials in Vault rejected: %v", err)
	}
}

// TestInvalidObjectsAreRejected checks that the API server refuses each invalid object with an
// error that names the field at fault.
func TestInvalidObjectsAreRejected(t *testing.T) {
	ns := global.Namespace(t)
	tests := []struct {
		name  string
		obj   client.Object
		field string
	}{
		{"site without kubeconfig secret", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.KubeconfigSecretRef.Name = "" }), "spec.kubeconfigSecretRef.name"},
		{"site with secret name not a DNS name", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.KubeconfigSecretRef.Name = "Bad_Name" }), "spec.kubeconfigSecretRef.name"},
		{"site with ftp BPA endpoint", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.BPAEndpoint = "ftp://bpa.example" }), "spec.bpaEndpoint"},
		{"site with BPA endpoint that is no URL", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.BPAEndpoint = "bpa.example:8443" }), "spec.bpaEndpoint"},
		{"site with latitude out of range", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.Location.Latitude = "91.5" }), "spec.location.latitude"},
		{"site with longitude not a number", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.Location.Longitude = "east" }), "spec.location.longitude"},
		{"site with four-field cron", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.MaintenanceWindows[0].Schedule = "0 2 * *" }), "spec.maintenanceWindows[0].schedule"},
		{"site with zero window", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.MaintenanceWindows[0].Duration.Duration = 0 }), "spec.maintenanceWindows[0].duration"},
		{"site with window over a week", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.MaintenanceWindows[0].Duration.Duration = 200 * time.Hour }), "spec.maintenanceWindows[0].duration"},
		{"host with unknown role", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.Role = "master" }), "spec.role"},
		{"host with bad MAC", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.BootMACAddress = "52:54:00:ab:cd" }), "spec.bootMACAddress"},
		{"host with http BMC", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.BMC.Address = "http://10.0.0.5" }), "spec.bmc.address"},
		{"host with BMC without host", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.BMC.Address = "ipmi://" }), "spec.bmc.address"},
		{"host without BMC credentials", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.BMC.CredentialsSecretRef.Name = "" }), "spec.bmc.credentialsSecretRef.name"},
		{"host with BMC credentials in a Secret and in Vault", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.BMC.CredentialsVaultRef = &fleetv1.VaultReference{Path: "bmc/cp-0"} }), "set exactly one of credentialsSecretRef and credentialsVaultRef"},
		{"host with no BMC credentials at all", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.BMC.CredentialsSecretRef = nil }), "set exactly one of credentialsSecretRef and credentialsVaultRef"},
		{"host with a Vault path climbing out of its namespace", mutateHost(ns, func(h *fleetv1.Host) {
			h.Spec.BMC.CredentialsSecretRef, h.Spec.BMC.CredentialsVaultRef = nil, &fleetv1.VaultReference{Path: "../other/bmc"}
		}), "spec.bmc.credentialsVaultRef.path"},
		{"host with an absolute Vault path", mutateHost(ns, func(h *fleetv1.Host) {
			h.Spec.BMC.CredentialsSecretRef, h.Spec.BMC.CredentialsVaultRef = nil, &fleetv1.VaultReference{Path: "/secret/data/x"}
		}), "spec.bmc.credentialsVaultRef.path"},
		{"site with kubeconfig in a Secret and in Vault", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.KubeconfigVaultRef = &fleetv1.VaultKeyReference{Path: "sites/a"} }), "set exactly one of kubeconfigSecretRef and kubeconfigVaultRef"},
		{"site with no kubeconfig at all", mutateSite(ns, func(s *fleetv1.Site) { s.Spec.KubeconfigSecretRef = nil }), "set exactly one of kubeconfigSecretRef and kubeconfigVaultRef"},
		{"site with an empty Vault path segment", mutateSite(ns, func(s *fleetv1.Site) {
			s.Spec.KubeconfigSecretRef, s.Spec.KubeconfigVaultRef = nil, &fleetv1.VaultKeyReference{Path: "sites//a"}
		}), "spec.kubeconfigVaultRef.path"},
		{"host without site", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.SiteRef.Name = "" }), "spec.siteRef.name"},
		{"host with empty root device hints", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.RootDeviceHints = &fleetv1.RootDeviceHints{} }), "spec.rootDeviceHints"},
		{"host with root device not under /dev", mutateHost(ns, func(h *fleetv1.Host) { h.Spec.RootDeviceHints.DeviceName = "sda" }), "spec.rootDeviceHints.deviceName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := global.Client.Create(t.Context(), tt.obj)
			if err == nil {
				t.Fatalf("accepted; want an error naming %s", tt.field)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error does not name %s: %v", tt.field, err)
			}
		})
	}
}

// TestImmutableFields checks that a host's site and boot MAC cannot be changed in place.
func TestImmutableFields(t *testing.T) {
	ns := global.Namespace(t)
	host := validHost(ns)
	if err := global.Client.Create(t.Context(), host); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field  string
		mutate func(*fleetv1.Host)
	}{
		{"spec.siteRef", func(h *fleetv1.Host) { h.Spec.SiteRef.Name = "other-site" }},
		{"spec.bootMACAddress", func(h *fleetv1.Host) { h.Spec.BootMACAddress = "52:54:00:ab:cd:99" }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			changed := host.DeepCopy()
			tt.mutate(changed)
			err := global.Client.Update(t.Context(), changed)
			if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), "immutable") {
				t.Fatalf("update of %s: got %v, want an 'immutable' error naming the field", tt.field, err)
			}
		})
	}
}

func mutateSite(ns string, f func(*fleetv1.Site)) *fleetv1.Site {
	s := validSite(ns)
	f(s)
	return s
}

func mutateHost(ns string, f func(*fleetv1.Host)) *fleetv1.Host {
	h := validHost(ns)
	f(h)
	return h
}

// TestRotationsOnlyGoUp: a rotation asked for cannot be taken back, by lowering the count or
// removing it; raising it is accepted.
func TestRotationsOnlyGoUp(t *testing.T) {
	ns := global.Namespace(t)
	site := validSite(ns)
	site.Spec.Cluster = &fleetv1.SiteCluster{
		Release: "r1",
		Network: sitev1.ClusterNetwork{PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
			ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10"}},
		Rotations: &sitev1.ClusterRotations{SecretEncryptionKey: 2, CertificateAuthorities: 2},
	}
	if err := global.Client.Create(t.Context(), site); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		rotate *sitev1.ClusterRotations
		want   string
	}{
		{"lowered", &sitev1.ClusterRotations{SecretEncryptionKey: 1, CertificateAuthorities: 2}, "can only be raised"},
		{"removed", &sitev1.ClusterRotations{CertificateAuthorities: 2}, "secretEncryptionKey cannot be removed once set"},
		{"negative", &sitev1.ClusterRotations{SecretEncryptionKey: -1, CertificateAuthorities: 2}, "should be greater than or equal to 0"},
		{"CA roll-over taken back", &sitev1.ClusterRotations{SecretEncryptionKey: 2}, "certificateAuthorities cannot be removed once set"},
		{"CA roll-over lowered", &sitev1.ClusterRotations{SecretEncryptionKey: 2, CertificateAuthorities: 1}, "can only be raised: each raise asks for one more roll-over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := site.DeepCopy()
			changed.Spec.Cluster.Rotations = tc.rotate
			if err := global.Client.Update(t.Context(), changed); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("update: %v, want %q", err, tc.want)
			}
		})
	}
	site.Spec.Cluster.Rotations.SecretEncryptionKey = 3
	site.Spec.Cluster.Rotations.CertificateAuthorities = 3
	if err := global.Client.Update(t.Context(), site); err != nil {
		t.Fatalf("raising the count: %v", err)
	}
}
