package cluster

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/edgefleet/edgefleet/bpa/install"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/pkg/secrets/secretsfake"
)

// TestPodsTrustNewCA: before the API servers present certificates of a new cluster CA, every
// kube-root-ca.crt holds it, and every workload whose pods mount the API access is restarted
// once and has rolled out; the others are left alone. Checked on client-go's fake clientset.
func TestPodsTrustNewCA(t *testing.T) {
	const newCA = "-----BEGIN CERTIFICATE-----\nNEW\n-----END CERTIFICATE-----\n"
	const oldCA = "-----BEGIN CERTIFICATE-----\nOLD\n-----END CERTIFICATE-----\n"
	rootCA := func(ns, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rootCAConfigMap}, Data: map[string]string{"ca.crt": data}}
	}
	template := func(automount *bool, annotations map[string]string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: corev1.PodSpec{AutomountServiceAccountToken: automount}}
	}
	deployment := func(name string, automount *bool, annotations map[string]string, rolledOut bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Generation: 2},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: template(automount, annotations)}}
		if rolledOut {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
		} else {
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2}
		}
		return d
	}
	both := oldCA + newCA
	// stamped is a template restarted for this roll-over already.
	stamped := map[string]string{CARestartAnnotation: caStamp([]byte(newCA))}
	for _, tc := range []struct {
		name          string
		objects       func() []runtime.Object
		wantWaiting   string
		wantRestarted []string
	}{
		{"a namespace's root CA not published yet", func() []runtime.Object {
			return []runtime.Object{rootCA("default", both), rootCA("apps", oldCA), deployment("api-client", nil, nil, true)}
		}, "ConfigMap kube-root-ca.crt of namespaces apps does not hold the new cluster CA yet", nil},
		{"workloads mounting the API access restarted, others left", func() []runtime.Object {
			return []runtime.Object{rootCA("default", both), rootCA("apps", both),
				deployment("api-client", nil, nil, true),
				deployment("no-api", ptr.To(false), nil, true),
				&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "agent"}, Spec: appsv1.DaemonSetSpec{Template: template(ptr.To(true), nil)}},
				&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "by-hand"}, Spec: appsv1.DaemonSetSpec{Template: template(nil, nil),
					UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}},
				&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db"}, Spec: appsv1.StatefulSetSpec{Template: template(nil, nil)}},
			}
		}, "restarting Deployment apps/api-client, DaemonSet apps/agent, StatefulSet apps/db so that their pods read the new cluster CA (0 of 3 rolled out)",
			[]string{"Deployment apps/api-client", "DaemonSet apps/agent", "StatefulSet apps/db"}},
		{"restarted, still rolling out", func() []runtime.Object {
			return []runtime.Object{rootCA("apps", both), deployment("api-client", nil, stamped, false), deployment("done", nil, stamped, true)}
		}, "restarting Deployment apps/api-client so that their pods read the new cluster CA (1 of 2 rolled out)", nil},
		{"restarted and rolled out", func() []runtime.Object {
			return []runtime.Object{rootCA("apps", newCA+oldCA), deployment("api-client", nil, stamped, true)}
		}, "", nil},
		{"restarted for an earlier roll-over", func() []runtime.Object {
			return []runtime.Object{rootCA("apps", both), deployment("api-client", nil, map[string]string{CARestartAnnotation: "0123456789abcdef"}, true)}
		}, "restarting Deployment apps/api-client", []string{"Deployment apps/api-client"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objects()...)
			step := &CAStep{}
			if err := podsTrustNewCA(context.Background(), cs, []byte(newCA), step); err != nil {
				t.Fatal(err)
			}
			if tc.wantWaiting == "" && step.Waiting != "" || !strings.Contains(step.Waiting, tc.wantWaiting) {
				t.Errorf("waiting %q, want %q", step.Waiting, tc.wantWaiting)
			}
			if !slices.Equal(step.Restarted, tc.wantRestarted) {
				t.Errorf("restarted %v, want %v", step.Restarted, tc.wantRestarted)
			}
			for _, name := range tc.wantRestarted {
				kind, key, _ := strings.Cut(name, " ")
				_, n, _ := strings.Cut(key, "/")
				var annotations map[string]string
				switch kind {
				case "Deployment":
					d, _ := cs.AppsV1().Deployments("apps").Get(context.Background(), n, metav1.GetOptions{})
					annotations = d.Spec.Template.Annotations
				case "DaemonSet":
					d, _ := cs.AppsV1().DaemonSets("apps").Get(context.Background(), n, metav1.GetOptions{})
					annotations = d.Spec.Template.Annotations
				case "StatefulSet":
					d, _ := cs.AppsV1().StatefulSets("apps").Get(context.Background(), n, metav1.GetOptions{})
					annotations = d.Spec.Template.Annotations
				}
				if annotations[CARestartAnnotation] != caStamp([]byte(newCA)) {
					t.Errorf("%s: template annotations %v, want the new CA's stamp", name, annotations)
				}
			}
			// A second look asks for no restart again.
			again := &CAStep{}
			if err := podsTrustNewCA(context.Background(), cs, []byte(newCA), again); err != nil {
				t.Fatal(err)
			}
			if len(again.Restarted) > 0 {
				t.Errorf("a second look restarted %v again", again.Restarted)
			}
		})
	}
}

// TestAPIClientsPages: the workloads are listed a page at a time, every page followed (the fake
// clientset serves Deployments in pages of one, as an API server would with a limit).
func TestAPIClientsPages(t *testing.T) {
	cs := fake.NewClientset()
	names := []string{"a", "b", "c"}
	var limits []int64
	cs.PrependReactor("list", "deployments", func(action k8stesting.Action) (bool, runtime.Object, error) {
		opts := action.(k8stesting.ListActionImpl).ListOptions
		limits = append(limits, opts.Limit)
		i := 0
		if opts.Continue != "" {
			i, _ = strconv.Atoi(opts.Continue)
		}
		page := &appsv1.DeploymentList{Items: []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: names[i]}}}}
		if i+1 < len(names) {
			page.Continue = strconv.Itoa(i + 1)
		}
		return true, page, nil
	})
	workloads, err := apiClients(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range workloads {
		got = append(got, w.name)
	}
	if want := []string{"Deployment apps/a", "Deployment apps/b", "Deployment apps/c"}; !slices.Equal(got, want) {
		t.Errorf("workloads %v, want %v", got, want)
	}
	if len(limits) != len(names) || slices.Contains(limits, 0) {
		t.Errorf("list requests with limits %v, want %d requests each with a page size", limits, len(names))
	}
}

// TestCARotationKeepsOldCAsForUsers: in UseNew the old CAs stay trusted until every cluster
// user's certificate the old cluster CA signed has expired (at most ClientCertificateMaxTTL
// after UseNew began), the wait said; then the roll-over drops them. The stored phase's start
// is what counts, also for a BPA started again.
func TestCARotationKeepsOldCAsForUsers(t *testing.T) {
	ctx := context.Background()
	store := &secretsfake.Store{}
	apiServer := install.Package{Manifest: &packages.Manifest{Name: "kube-apiserver", Config: []packages.ConfigFile{{Path: "/etc/kubernetes/encryption-config.yaml", PKI: pki.EncryptionConfigFile}}}}
	spec := Spec{Name: "app", APIEndpoint: "192.0.2.10", Packages: []install.Package{apiServer}, CARotations: 1, ClientCertificateMaxTTL: time.Hour,
		Hosts: []Host{{Name: "cp-0", IP: netip.MustParseAddr("192.0.2.10"), ControlPlane: true}}}
	if _, err := pki.Ensure(ctx, store, PKISecret(spec.Name), spec.PKISpec()); err != nil {
		t.Fatal(err)
	}
	useNew := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	if st, err := pki.AdvanceCARotation(ctx, store, PKISecret(spec.Name), useNew); err != nil || st.Phase != pki.RotationUseNew {
		t.Fatalf("AdvanceCARotation from AddNew: %+v, %v", st, err)
	}
	bu := New(nil, store)
	for _, c := range []struct {
		at          time.Time
		wantPhase   pki.RotationPhase
		wantWaiting string
	}{
		{useNew.Add(59 * time.Minute), pki.RotationUseNew, "cluster users' certificates the old cluster CA signed (until 2026-11-25T10:00:00Z) may be valid until 2026-11-25T11:00:00Z: the old CAs stay trusted until then"},
		{useNew.Add(time.Hour), pki.RotationDropOld, ""},
	} {
		bundle, err := pki.Ensure(ctx, store, PKISecret(spec.Name), spec.PKISpec())
		if err != nil {
			t.Fatal(err)
		}
		res := &Result{}
		if err := bu.advanceCARotation(ctx, res, spec, bundle, c.at); err != nil {
			t.Fatal(err)
		}
		if wantUntil := useNew.Add(time.Hour); c.wantWaiting != "" && !res.CAs.Until.Equal(wantUntil) || c.wantWaiting == "" && !res.CAs.Until.IsZero() {
			t.Errorf("at %s: the wait ends %s, want %s while waiting", c.at.Format(time.TimeOnly), res.CAs.Until, wantUntil)
		}
		if res.CAs.Phase != c.wantPhase || !strings.HasPrefix(res.CAs.Waiting, c.wantWaiting) || (c.wantWaiting == "") != (res.CAs.Waiting == "") {
			t.Errorf("at %s: phase %q, waiting %q; want phase %q, waiting %q", c.at.Format(time.TimeOnly), res.CAs.Phase, res.CAs.Waiting, c.wantPhase, c.wantWaiting)
		}
	}
}

// TestUsersKeepWorking: each phase of a roll-over that cluster users' kubeconfigs depend on waits
// a credential's longest life from its start, and says until when.
func TestUsersKeepWorking(t *testing.T) {
	since := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		phase  pki.RotationPhase
		maxTTL time.Duration
		at     time.Time
		want   string
	}{
		{pki.RotationAddNew, time.Hour, since.Add(time.Minute), "cluster users' kubeconfigs issued before the roll-over began (2026-11-25T10:00:00Z) trust the old cluster CA only and may be valid until 2026-11-25T11:00:00Z"},
		{pki.RotationAddNew, time.Hour, since.Add(time.Hour), ""},
		{pki.RotationUseNew, 12 * time.Hour, since.Add(11 * time.Hour), "cluster users' certificates the old cluster CA signed (until 2026-11-25T10:00:00Z) may be valid until 2026-11-25T22:00:00Z"},
		{pki.RotationUseNew, 12 * time.Hour, since.Add(13 * time.Hour), ""},
		{pki.RotationDropOld, time.Hour, since.Add(time.Minute), ""}, // nothing signed by or trusting the old CAs only is left
		{pki.RotationUseNew, 0, since, ""},                           // no cluster user's certificate is signed
	} {
		got, until := usersKeepWorking(pki.CARotation{Phase: c.phase, Since: since}, c.maxTTL, c.at)
		if !strings.HasPrefix(got, c.want) || (got == "") != (c.want == "") {
			t.Errorf("%s, max %s, at %s: %q, want %q", c.phase, c.maxTTL, c.at.Format(time.TimeOnly), got, c.want)
		}
		if wantUntil := since.Add(c.maxTTL); (got != "") != !until.IsZero() || got != "" && !until.Equal(wantUntil) {
			t.Errorf("%s, max %s, at %s: until %s, want %s while waiting, none otherwise", c.phase, c.maxTTL, c.at.Format(time.TimeOnly), until, wantUntil)
		}
	}
}
