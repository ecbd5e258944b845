package setup

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	securityapi "istio.io/api/security/v1beta1"
	securityv1 "istio.io/client-go/pkg/apis/security/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/edgefleet/edgefleet/pkg/meshpolicy"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestMeshComponentFollowsTheServedPorts checks that the policies open the ports the
// controller serves, to the callers the flags name, and nothing else.
func TestMeshComponentFollowsTheServedPorts(t *testing.T) {
	gateway := meshpolicy.ServiceAccount("istio-system", "istio-ingressgateway-service-account")
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   []meshpolicy.Port
	}{
		{"defaults: the artifact API to the ingress gateway", func(*Options) {}, []meshpolicy.Port{
			{Name: "artifact API and web UI", Number: 8090, Principals: []string{gateway}},
		}},
		{"webhooks to the API servers' addresses", func(o *Options) {
			o.APIAddr = ":8443"
			o.WebhookPort, o.WebhookCertDir = 9443, "/tls"
			o.IstioWebhookSourceRanges = []string{"10.0.0.1"}
		}, []meshpolicy.Port{
			{Name: "artifact API and web UI", Number: 8443, Principals: []string{gateway}},
			{Name: "webhooks", Number: 9443, SourceRanges: []string{"10.0.0.1"}},
		}},
		{"no artifact API: every port closed", func(o *Options) { o.APIAddr = "0" }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			c, err := meshComponent(o)
			if err != nil {
				t.Fatal(err)
			}
			if c.Namespace != "edgefleet-system" || c.Name != MeshPolicyName || c.Selector["app.kubernetes.io/name"] != MeshPolicyName {
				t.Errorf("component %s/%s selecting %v, want edgefleet-system/%s selecting its pods", c.Namespace, c.Name, c.Selector, MeshPolicyName)
			}
			if !reflect.DeepEqual(c.Ports, tc.want) {
				t.Errorf("ports %+v, want %+v", c.Ports, tc.want)
			}
		})
	}
}

// TestRunKeepsAndUninstallsMeshPolicies runs the global controller as its main does, on a
// global cluster with Istio's CRDs: its policies open the artifact API's port to the ingress
// gateway, and a run with --uninstall-mesh-policies after it stopped removes them.
func TestRunKeepsAndUninstallsMeshPolicies(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "global", InstallCRDs: true, IstioCRDs: true})
	kubeconfig, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(opts.Kubeconfig, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.APIAddr = l.Addr().String()
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	opts.MetricsAddr, opts.ProbeAddr, opts.Election.Enabled = "0", "0", false
	opts.DataDir = t.TempDir()
	opts.Istio = meshpolicy.ModeOn
	opts.IstioNamespace = cp.Namespace(t)
	s := controlplane.Scheme()
	if err := securityv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cp.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: opts.IstioNamespace, Name: MeshPolicyName}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { _ = stop() })
	testutil.Eventually(t, time.Minute, func() error {
		pa, ap := &securityv1.PeerAuthentication{}, &securityv1.AuthorizationPolicy{}
		if err := cl.Get(t.Context(), key, pa); err != nil {
			return err
		}
		if pa.Spec.GetMtls().GetMode() != securityapi.PeerAuthentication_MutualTLS_STRICT {
			return fmt.Errorf("PeerAuthentication mTLS %v, want STRICT", pa.Spec.GetMtls())
		}
		if err := cl.Get(t.Context(), key, ap); err != nil {
			return err
		}
		want := meshpolicy.ServiceAccount("istio-system", "istio-ingressgateway-service-account")
		if r := ap.Spec.GetRules(); len(r) != 1 || !slices.Equal(r[0].GetTo()[0].GetOperation().GetPorts(), []string{port}) ||
			!slices.Equal(r[0].GetFrom()[0].GetSource().GetPrincipals(), []string{want}) {
			return fmt.Errorf("AuthorizationPolicy rules %v, want port %s to %s only", r, port, want)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("global controller: %v", err)
	}

	opts.UninstallMeshPolicies = true
	if err := Run(t.Context(), opts); err != nil {
		t.Fatalf("--uninstall-mesh-policies: %v", err)
	}
	for _, o := range []client.Object{&securityv1.PeerAuthentication{}, &securityv1.AuthorizationPolicy{}} {
		if err := cl.Get(t.Context(), key, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T after --uninstall-mesh-policies: %v, want not found", o, err)
		}
	}
}
