package edgemachine

import (
	"slices"
	"strings"
	"testing"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

type hostOpt func(*metal3api.BareMetalHost)

func host(name, mac string, opts ...hostOpt) metal3api.BareMetalHost {
	h := metal3api.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: "site", Name: name},
		Spec:       metal3api.BareMetalHostSpec{BootMACAddress: mac},
		Status:     metal3api.BareMetalHostStatus{Provisioning: metal3api.ProvisionStatus{State: metal3api.StateAvailable}},
	}
	for _, o := range opts {
		o(&h)
	}
	return h
}

func labels(kv ...string) hostOpt {
	return func(h *metal3api.BareMetalHost) {
		h.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Labels[kv[i]] = kv[i+1]
		}
	}
}

func claimedByMachine(name string) hostOpt {
	return func(h *metal3api.BareMetalHost) {
		h.Spec.ConsumerRef = &corev1.ObjectReference{APIVersion: sitev1.GroupVersion.String(), Kind: "EdgeMachine", Namespace: "site", Name: name}
	}
}

func state(s metal3api.ProvisioningState) hostOpt {
	return func(h *metal3api.BareMetalHost) { h.Status.Provisioning.State = s }
}

func failed(h *metal3api.BareMetalHost) {
	h.Status.OperationalStatus = metal3api.OperationalStatusError
	h.Status.ErrorType = metal3api.RegistrationError
	h.Status.ErrorMessage = "BMC unreachable"
}

func deleting(h *metal3api.BareMetalHost) {
	now := metav1.Now()
	h.DeletionTimestamp = &now
}

func TestSelectHosts(t *testing.T) {
	worker := map[string]string{"role": "worker"}
	tests := []struct {
		name    string
		hosts   []metal3api.BareMetalHost
		sel     sitev1.HostSelector
		want    []string // candidate names, in order
		wantWhy string   // part of the reason when there is none
	}{
		{"exact MAC, case-insensitive",
			[]metal3api.BareMetalHost{host("a", "52:54:00:00:00:0a"), host("b", "52:54:00:00:00:0b")},
			sitev1.HostSelector{BootMACAddress: "52:54:00:00:00:0B"}, []string{"b"}, ""},
		{"MAC never matches in part",
			[]metal3api.BareMetalHost{host("a", "52:54:00:00:00:0a1"), host("b", "152:54:00:00:00:0a")},
			sitev1.HostSelector{BootMACAddress: "52:54:00:00:00:0a"}, nil, "no BareMetalHost has the boot MAC"},
		{"MAC host in any state, even failed",
			[]metal3api.BareMetalHost{host("a", "52:54:00:00:00:0a", state(metal3api.StateRegistering), failed)},
			sitev1.HostSelector{BootMACAddress: "52:54:00:00:00:0a"}, []string{"a"}, ""},
		{"MAC host claimed by another",
			[]metal3api.BareMetalHost{host("a", "52:54:00:00:00:0a", claimedByMachine("other"))},
			sitev1.HostSelector{BootMACAddress: "52:54:00:00:00:0a"}, nil, "claimed by EdgeMachine site/other"},
		{"MAC host being deleted",
			[]metal3api.BareMetalHost{host("a", "52:54:00:00:00:0a", deleting)},
			sitev1.HostSelector{BootMACAddress: "52:54:00:00:00:0a"}, nil, "being deleted"},
		{"duplicate MAC refused",
			[]metal3api.BareMetalHost{host("a", "52:54:00:00:00:0a"), host("b", "52:54:00:00:00:0A")},
			sitev1.HostSelector{BootMACAddress: "52:54:00:00:00:0a"}, nil, "refusing to choose"},
		{"MAC and labels must both match",
			[]metal3api.BareMetalHost{host("a", "52:54:00:00:00:0a", labels("role", "control-plane"))},
			sitev1.HostSelector{BootMACAddress: "52:54:00:00:00:0a", MatchLabels: worker}, nil, "lacks the labels {role=worker}"},
		{"labels: free available hosts by name",
			[]metal3api.BareMetalHost{
				host("w2", "", labels("role", "worker")),
				host("cp", "", labels("role", "control-plane")),
				host("w0", "", labels("role", "worker", "rack", "1")),
				host("w1", "", labels("role", "worker"), claimedByMachine("m0")),
				host("w3", "", labels("role", "worker"), state(metal3api.StateProvisioned)),
				host("w4", "", labels("role", "worker"), state(metal3api.StateInspecting)),
				host("w5", "", labels("role", "worker"), failed),
				host("w6", "", labels("role", "worker"), deleting),
				host("w7", "", labels("role", "worker"), state(metal3api.StateReady)),
			},
			sitev1.HostSelector{MatchLabels: worker}, []string{"w0", "w2", "w7"}, ""},
		{"labels: none free says why",
			[]metal3api.BareMetalHost{
				host("w1", "", labels("role", "worker"), claimedByMachine("m0")),
				host("w4", "", labels("role", "worker"), state(metal3api.StateInspecting)),
			},
			sitev1.HostSelector{MatchLabels: worker}, nil, "w1 claimed by EdgeMachine site/m0; w4 inspecting"},
		{"labels: no host carries them",
			[]metal3api.BareMetalHost{host("cp", "", labels("role", "control-plane"))},
			sitev1.HostSelector{MatchLabels: worker}, nil, "no BareMetalHost carries the labels {role=worker}"},
		{"labels: all must match",
			[]metal3api.BareMetalHost{host("w0", "", labels("role", "worker"))},
			sitev1.HostSelector{MatchLabels: map[string]string{"role": "worker", "rack": "2"}}, nil, "no BareMetalHost carries"},
		{"empty selector selects nothing",
			[]metal3api.BareMetalHost{host("w0", "", labels("role", "worker"))},
			sitev1.HostSelector{}, nil, "neither bootMACAddress nor matchLabels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := selectHosts(tt.hosts, tt.sel)
			var names []string
			for _, h := range got.candidates {
				names = append(names, h.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("candidates = %v, want %v (why %q)", names, tt.want, got.why)
			}
			if tt.wantWhy != "" && !strings.Contains(got.why, tt.wantWhy) {
				t.Errorf("why = %q, want it to contain %q", got.why, tt.wantWhy)
			}
		})
	}
}

func TestConsumedBy(t *testing.T) {
	em := &sitev1.EdgeMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "site", Name: "m0"}}
	ref := func(apiVersion, kind, ns, name string) hostOpt {
		return func(h *metal3api.BareMetalHost) {
			h.Spec.ConsumerRef = &corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}
		}
	}
	tests := []struct {
		name string
		opt  hostOpt
		want bool
	}{
		{"this machine", ref(sitev1.GroupVersion.String(), "EdgeMachine", "site", "m0"), true},
		{"namespace left out", ref(sitev1.GroupVersion.String(), "EdgeMachine", "", "m0"), true},
		{"another version of the group", ref(sitev1.GroupVersion.Group+"/v1", "EdgeMachine", "site", "m0"), true},
		{"other name", ref(sitev1.GroupVersion.String(), "EdgeMachine", "site", "m1"), false},
		{"other namespace", ref(sitev1.GroupVersion.String(), "EdgeMachine", "other", "m0"), false},
		{"other kind", ref(sitev1.GroupVersion.String(), "EdgeCluster", "site", "m0"), false},
		{"Metal3Machine of the same name", ref("infrastructure.cluster.x-k8s.io/v1beta1", "Metal3Machine", "site", "m0"), false},
		{"unclaimed", func(*metal3api.BareMetalHost) {}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host("a", "", tt.opt)
			if got := consumedBy(&h, em); got != tt.want {
				t.Errorf("consumedBy = %v, want %v", got, tt.want)
			}
		})
	}
	h := host("a", "")
	h.Spec.ConsumerRef = consumerRef(em)
	if !consumedBy(&h, em) {
		t.Errorf("consumedBy does not recognize consumerRef %+v", h.Spec.ConsumerRef)
	}
}

func TestHostStatusHelpers(t *testing.T) {
	h := host("node-1", "")
	if msg := hostError(&h); msg != "" {
		t.Errorf("hostError of a healthy host = %q", msg)
	}
	failed(&h)
	if msg := hostError(&h); msg != "registration error: BMC unreachable" {
		t.Errorf("hostError = %q", msg)
	}

	h = host("node-1", "", state(metal3api.StateProvisioned))
	h.Spec.Image = &metal3api.Image{URL: "http://cache/os.img", Checksum: "abc"}
	if provisioned(&h) {
		t.Error("provisioned before Metal3 reports the image")
	}
	h.Status.Provisioning.Image = metal3api.Image{URL: "http://cache/old.img", Checksum: "abc"}
	if provisioned(&h) {
		t.Error("provisioned with another image")
	}
	h.Status.Provisioning.Image = *h.Spec.Image
	if !provisioned(&h) {
		t.Error("not provisioned with the spec's image in state provisioned")
	}

	h.Status.HardwareDetails = &metal3api.HardwareDetails{NIC: []metal3api.NIC{
		{Name: "a", IP: "192.168.100.1"}, {Name: "b"}, {Name: "c", IP: "192.168.100.2"}, {Name: "d", IP: "192.168.100.1"},
	}}
	want := []sitev1.MachineAddress{{Type: "Hostname", Address: "node-1"}, {Type: "InternalIP", Address: "192.168.100.1"}, {Type: "InternalIP", Address: "192.168.100.2"}}
	if got := addresses(&h); !slices.Equal(got, want) {
		t.Errorf("addresses = %v, want %v", got, want)
	}
	if got := providerID(&h); got != "metal3://site/node-1" {
		t.Errorf("providerID = %q", got)
	}
}
