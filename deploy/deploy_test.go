// Package deploy_test checks the kustomize bases of deploy/ against a real API server.
package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestBasesServerDryRun applies deploy/local-controller, deploy/bpa, the global controller's
// access (deploy/rbac/site) and deploy/global-controller with a server-side dry run on a real
// API server that has Cluster-API's and Metal3's CRDs, as a site cluster has: the server
// validates every object (schemas, RBAC rules, the CRDs themselves) and stores none.
func TestBasesServerDryRun(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "deploy", ClusterAPICRDs: true, Metal3CRDs: true})
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cp.AdminKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	// A dry run creates nothing, so the namespaced objects would find no namespace: they are made
	// for real first (dry-run of the Namespaces themselves is still checked below).
	for _, ns := range []string{"edgefleet-system", "edgefleet-hosts", "edgefleet-kms"} {
		if err := cp.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		base string
		want []string
	}{
		{"deploy/local-controller", []string{
			"namespace/edgefleet-system",
			"customresourcedefinition.apiextensions.k8s.io/applicationclusters.site.edgefleet.io",
			"customresourcedefinition.apiextensions.k8s.io/artifactsets.site.edgefleet.io",
			"serviceaccount/edgefleet-local-controller",
			"clusterrole.rbac.authorization.k8s.io/edgefleet-local-controller",
			"role.rbac.authorization.k8s.io/edgefleet-local-controller",
			"clusterrolebinding.rbac.authorization.k8s.io/edgefleet-local-controller",
			"rolebinding.rbac.authorization.k8s.io/edgefleet-local-controller",
			"persistentvolumeclaim/edgefleet-site-cache",
			"deployment.apps/edgefleet-local-controller",
		}},
		{"deploy/bpa", []string{
			"namespace/edgefleet-system",
			"namespace/edgefleet-kms",
			"customresourcedefinition.apiextensions.k8s.io/clustercredentialrequests.site.edgefleet.io",
			"serviceaccount/edgefleet-bpa",
			"clusterrole.rbac.authorization.k8s.io/edgefleet-bpa",
			"role.rbac.authorization.k8s.io/edgefleet-bpa",
			"clusterrolebinding.rbac.authorization.k8s.io/edgefleet-bpa",
			"rolebinding.rbac.authorization.k8s.io/edgefleet-bpa",
			"deployment.apps/edgefleet-bpa",
		}},
		{"deploy/global-controller", []string{
			"namespace/edgefleet-system",
			"customresourcedefinition.apiextensions.k8s.io/campaigns.fleet.edgefleet.io",
			"serviceaccount/edgefleet-global-controller",
			"clusterrole.rbac.authorization.k8s.io/edgefleet-global-controller",
			"persistentvolumeclaim/edgefleet-data",
			"service/edgefleet-webhook",
			"deployment.apps/edgefleet-global-controller",
			"validatingwebhookconfiguration.admissionregistration.k8s.io/edgefleet-global-controller",
		}},
		{"deploy/rbac/site", []string{
			"namespace/edgefleet-hosts",
			"serviceaccount/edgefleet-global",
			"role.rbac.authorization.k8s.io/edgefleet-global",
			"rolebinding.rbac.authorization.k8s.io/edgefleet-global",
		}},
	} {
		t.Run(filepath.Base(tc.base), func(t *testing.T) {
			rendered := kubectl(t, root, "kustomize", tc.base)
			if strings.Contains(rendered, "\nkind: Secret\n") {
				t.Errorf("%s holds a Secret; a base ships no secrets", tc.base)
			}
			out := kubectl(t, root, "--kubeconfig", kubeconfig, "apply", "--server-side", "-k", tc.base, "--dry-run=server")
			for _, obj := range tc.want {
				if !strings.Contains(out, obj+" serverside-applied (server dry run)") {
					t.Errorf("dry run of %s: no %s in\n%s", tc.base, obj, out)
				}
			}
		})
	}
}

func kubectl(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "bin", "kubectl"), args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestGlobalBaseServesItsWebhooks checks that deploy/global-controller registers every admission
// webhook the controller serves (deploy/webhook/global-controller, as generated) and that each
// reaches it: a Service of the base whose port leads to the controller container's webhook port,
// the one its --webhook-port flag opens, with the webhook certificate's directory mounted.
func TestGlobalBaseServesItsWebhooks(t *testing.T) {
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var generated admissionregistrationv1.ValidatingWebhookConfiguration
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "webhook", "global-controller", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &generated); err != nil {
		t.Fatal(err)
	}
	var (
		configs  []admissionregistrationv1.ValidatingWebhookConfiguration
		services = map[string]corev1.Service{}
		deploy   appsv1.Deployment
	)
	for _, doc := range strings.Split(kubectl(t, root, "kustomize", "deploy/global-controller"), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		var into any
		switch meta.Kind {
		case "ValidatingWebhookConfiguration":
			configs = append(configs, admissionregistrationv1.ValidatingWebhookConfiguration{})
			into = &configs[len(configs)-1]
		case "Service":
			var svc corev1.Service
			if err := yaml.Unmarshal([]byte(doc), &svc); err != nil {
				t.Fatal(err)
			}
			services[svc.Namespace+"/"+svc.Name] = svc
		case "Deployment":
			into = &deploy
		}
		if into != nil {
			if err := yaml.Unmarshal([]byte(doc), into); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(configs) != 1 {
		t.Fatalf("deploy/global-controller renders %d ValidatingWebhookConfigurations, want 1", len(configs))
	}
	registered := map[string]admissionregistrationv1.ValidatingWebhook{}
	for _, w := range configs[0].Webhooks {
		registered[w.Name] = w
	}
	if len(generated.Webhooks) == 0 || len(registered) != len(generated.Webhooks) {
		t.Errorf("the base registers %d webhooks, the controller serves %d", len(registered), len(generated.Webhooks))
	}

	// The controller container: its webhook port and certificate directory.
	var port *corev1.ContainerPort
	var args []string
	var mounts []corev1.VolumeMount
	for _, c := range deploy.Spec.Template.Spec.Containers {
		if c.Name == "global-controller" {
			args, mounts = c.Args, c.VolumeMounts
			for i := range c.Ports {
				if c.Ports[i].Name == "webhooks" {
					port = &c.Ports[i]
				}
			}
		}
	}
	if port == nil {
		t.Fatalf("the global controller's container has no port named webhooks")
	}
	if want := fmt.Sprintf("--webhook-port=%d", port.ContainerPort); !slices.Contains(args, want) {
		t.Errorf("the container's webhook port is %d, but its args %q lack %s", port.ContainerPort, args, want)
	}
	certDir := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--webhook-cert-dir="); ok {
			certDir = v
		}
	}
	if certDir == "" || !slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool { return m.MountPath == certDir }) {
		t.Errorf("the webhook certificate's directory %q is not a mount of the container (%v)", certDir, mounts)
	}

	for _, want := range generated.Webhooks {
		got, ok := registered[want.Name]
		if !ok {
			t.Errorf("webhook %s is not registered by the base", want.Name)
			continue
		}
		ref := got.ClientConfig.Service
		if ref == nil || ref.Path == nil || want.ClientConfig.Service == nil || *ref.Path != *want.ClientConfig.Service.Path {
			t.Errorf("webhook %s: service %+v, want the generated path", want.Name, ref)
			continue
		}
		svc, ok := services[ref.Namespace+"/"+ref.Name]
		if !ok {
			t.Errorf("webhook %s calls Service %s/%s, which the base does not have", want.Name, ref.Namespace, ref.Name)
			continue
		}
		svcPort := int32(443)
		if ref.Port != nil {
			svcPort = *ref.Port
		}
		reaches := false
		for _, p := range svc.Spec.Ports {
			if p.Port == svcPort && (p.TargetPort.StrVal == port.Name || p.TargetPort.IntValue() == int(port.ContainerPort)) {
				reaches = true
			}
		}
		if !reaches {
			t.Errorf("webhook %s: Service %s port %d does not lead to the container's webhook port %d", want.Name, svc.Name, svcPort, port.ContainerPort)
		}
		for k, v := range svc.Spec.Selector {
			if deploy.Spec.Template.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the controller's pods do not carry", svc.Name, k, v)
			}
		}
	}
}
