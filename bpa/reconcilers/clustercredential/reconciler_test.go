package clustercredential_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/bpa/reconcilers/clustercredential"
	"github.com/edgefleet/edgefleet/pkg/clustercred"
	"github.com/edgefleet/edgefleet/pkg/secrets/secretsfake"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

const maxTTL = 2 * time.Hour

var (
	site  *controlplane.ControlPlane
	store = &secretsfake.Store{}
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunWithManager(m, controlplane.Options{Name: "site", InstallSiteCRDs: true},
		func(_ context.Context, cp *controlplane.ControlPlane, mgr manager.Manager) error {
			site = cp
			r := &clustercredential.Reconciler{
				Client: mgr.GetClient(), Secrets: store, Recorder: mgr.GetEventRecorder("bpa"),
				Clock: clock.RealClock{}, MaxTTL: maxTTL,
			}
			return r.SetupWithManager(mgr, controller.Options{SkipNameValidation: ptr(true)})
		}))
}

func ptr[T any](v T) *T { return &v }

// install makes cluster look installed to the BPA: an ApplicationCluster, its PKI and its
// admin kubeconfig in the secret store.
func install(t *testing.T, ns, name string) *pki.Bundle {
	t.Helper()
	ctx := t.Context()
	ac := &sitev1.ApplicationCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sitev1.ApplicationClusterSpec{
			KubernetesVersion: "v1.36.3",
			OSImage:           sitev1.OSImage{SHA256: strings.Repeat("0", 64)},
			Network: sitev1.ClusterNetwork{PodCIDRs: []string{"10.244.0.0/16"}, ServiceCIDRs: []string{"10.96.0.0/12"},
				ControlPlaneEndpoint: sitev1.APIEndpoint{Host: "10.0.0.10", Port: 6443}},
			Hosts: []sitev1.ClusterHost{{Name: "cp-0", Role: sitev1.RoleControlPlane, BootMACAddress: "52:54:00:00:00:01", Address: "10.0.0.10",
				BMC: sitev1.BMC{Address: "redfish+https://192.0.2.1/redfish/v1/Systems/cp-0", CredentialsName: "cp-0-bmc"}}},
		},
	}
	if err := site.Client.Create(ctx, ac); err != nil {
		t.Fatal(err)
	}
	spec := cluster.Spec{Name: name, APIEndpoint: "10.0.0.10", Hosts: []cluster.Host{{Name: "cp-0", IP: netip.MustParseAddr("10.0.0.10"), ControlPlane: true}}}
	bundle, err := pki.Ensure(ctx, store, cluster.PKISecret(name), spec.PKISpec())
	if err != nil {
		t.Fatal(err)
	}
	kc, err := bundle.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, cluster.AdminKubeconfigSecret(name), map[string][]byte{"value": kc}); err != nil {
		t.Fatal(err)
	}
	return bundle
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ccr-"}}
	if err := site.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func csr(t *testing.T, subject pkix.Name) (string, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), key
}

// ask creates a request and waits for the BPA's answer.
func ask(t *testing.T, ns string, spec sitev1.ClusterCredentialRequestSpec) *sitev1.ClusterCredentialRequest {
	t.Helper()
	ctx := t.Context()
	ccr := &sitev1.ClusterCredentialRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "kubeconfig-"}, Spec: spec}
	if err := site.Client.Create(ctx, ccr); err != nil {
		t.Fatalf("create request: %v", err)
	}
	testutil.WaitFor(t, 30*time.Second, "an answer to "+ccr.Name, func() (bool, string) {
		if err := site.Client.Get(ctx, client.ObjectKeyFromObject(ccr), ccr); err != nil {
			t.Fatal(err)
		}
		return ccr.Answered(), fmt.Sprintf("status %+v", ccr.Status)
	})
	return ccr
}

func TestAnswers(t *testing.T) {
	ns := namespace(t)
	bundle := install(t, ns, "app")
	id, err := clustercred.IdentityOf("alice", []string{"dev"})
	if err != nil {
		t.Fatal(err)
	}
	valid := func(csrPEM string, expires time.Time) sitev1.ClusterCredentialRequestSpec {
		return sitev1.ClusterCredentialRequestSpec{Cluster: "app", CSR: csrPEM, User: id.User, Groups: id.Groups, ExpirationTime: metav1.NewTime(expires)}
	}

	t.Run("signs the spec's identity for the CSR's key, with the cluster's CA and server", func(t *testing.T) {
		csrPEM, key := csr(t, pkix.Name{})
		expires := time.Now().Add(time.Hour).Truncate(time.Second)
		got := ask(t, ns, valid(csrPEM, expires))
		if got.Status.Reason != "" {
			t.Fatalf("refused: %s: %s", got.Status.Reason, got.Status.Message)
		}
		block, _ := pem.Decode([]byte(got.Status.Certificate))
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		caBlock, _ := pem.Decode([]byte(got.Status.CertificateAuthority))
		ca, err := x509.ParseCertificate(caBlock.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := cert.CheckSignatureFrom(ca); err != nil {
			t.Errorf("certificate not signed by the answered CA: %v", err)
		}
		adminCfg, err := bundle.AdminKubeconfig()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(adminCfg), got.Status.Server) || got.Status.Server != "https://10.0.0.10:6443" {
			t.Errorf("server %q, want the admin kubeconfig's https://10.0.0.10:6443", got.Status.Server)
		}
		if cert.Subject.CommonName != id.User || !slices.Equal(slices.Sorted(slices.Values(cert.Subject.Organization)), id.Groups) {
			t.Errorf("subject %s, want %s in %v", cert.Subject, id.User, id.Groups)
		}
		if !key.PublicKey.Equal(cert.PublicKey) {
			t.Error("the certificate is not for the CSR's key")
		}
		if !cert.NotAfter.Equal(expires) || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
			t.Errorf("NotAfter %s (want %s), usages %v", cert.NotAfter, expires, cert.ExtKeyUsage)
		}
	})

	t.Run("never beyond the maximum lifetime", func(t *testing.T) {
		csrPEM, _ := csr(t, pkix.Name{})
		got := ask(t, ns, valid(csrPEM, time.Now().Add(100*time.Hour)))
		block, _ := pem.Decode([]byte(got.Status.Certificate))
		if block == nil {
			t.Fatalf("no certificate: %+v", got.Status)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if cert.NotAfter.After(time.Now().Add(maxTTL)) {
			t.Errorf("NotAfter %s, beyond %s from now", cert.NotAfter, maxTTL)
		}
	})

	for _, tc := range []struct {
		name   string
		spec   func() sitev1.ClusterCredentialRequestSpec
		reason string
		msg    string
	}{
		{name: "a CSR asking for system:masters", reason: sitev1.CredentialReasonInvalidRequest, msg: "neither empty nor the identity",
			spec: func() sitev1.ClusterCredentialRequestSpec {
				c, _ := csr(t, pkix.Name{CommonName: id.User, Organization: []string{"system:masters"}})
				return valid(c, time.Now().Add(time.Hour))
			}},
		{name: "an identity not under edgefleet:", reason: sitev1.CredentialReasonInvalidRequest, msg: "must start with",
			spec: func() sitev1.ClusterCredentialRequestSpec {
				c, _ := csr(t, pkix.Name{})
				s := valid(c, time.Now().Add(time.Hour))
				s.User = "kubernetes-admin"
				return s
			}},
		{name: "an expiry in the past", reason: sitev1.CredentialReasonInvalidRequest, msg: "spec.expirationTime",
			spec: func() sitev1.ClusterCredentialRequestSpec {
				c, _ := csr(t, pkix.Name{})
				return valid(c, time.Now().Add(-time.Minute))
			}},
		{name: "a cluster that does not exist", reason: sitev1.CredentialReasonClusterNotInstalled, msg: "no ApplicationCluster",
			spec: func() sitev1.ClusterCredentialRequestSpec {
				c, _ := csr(t, pkix.Name{})
				s := valid(c, time.Now().Add(time.Hour))
				s.Cluster = "other"
				return s
			}},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			got := ask(t, ns, tc.spec())
			if got.Status.Certificate != "" || got.Status.Reason != tc.reason || !strings.Contains(got.Status.Message, tc.msg) {
				t.Errorf("status %+v, want reason %s with %q and no certificate", got.Status, tc.reason, tc.msg)
			}
		})
	}

	t.Run("refuses a cluster not installed yet", func(t *testing.T) {
		ns := namespace(t)
		install(t, ns, "app")
		if err := store.Delete(t.Context(), cluster.AdminKubeconfigSecret("app")); err != nil {
			t.Fatal(err)
		}
		c, _ := csr(t, pkix.Name{})
		got := ask(t, ns, valid(c, time.Now().Add(time.Hour)))
		if got.Status.Reason != sitev1.CredentialReasonClusterNotInstalled {
			t.Errorf("status %+v, want %s", got.Status, sitev1.CredentialReasonClusterNotInstalled)
		}
	})

	t.Run("the API server refuses a system: identity in the spec", func(t *testing.T) {
		c, _ := csr(t, pkix.Name{})
		s := valid(c, time.Now().Add(time.Hour))
		s.Groups = append(s.Groups, "system:masters")
		err := site.Client.Create(t.Context(), &sitev1.ClusterCredentialRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "kubeconfig-"}, Spec: s})
		if !apierrors.IsInvalid(err) {
			t.Errorf("create: %v, want Invalid", err)
		}
	})
}
