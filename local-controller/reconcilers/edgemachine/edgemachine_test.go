package edgemachine_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestBindByBootMAC: a machine waits for its Machine's bootstrap data, then takes exactly the
// host with its boot MAC (given in upper case, the host's in lower case) among three, and
// Metal3 provisions it: the machine gets providerID, provisioned=true and addresses, the host
// image, user data, online and the consumerRef; the other hosts stay untouched.
func TestBindByBootMAC(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	for i, name := range []string{"node-a", "node-b", "node-c"} {
		s.host(name, fmt.Sprintf("52:54:00:aa:00:0%c", 'a'+i), nil)
	}
	em := s.machine("cp-0", sitev1.HostSelector{BootMACAddress: "52:54:00:AA:00:0B"}, "", true)
	s.startManager()

	em = s.waitReady(em.Name, metav1.ConditionFalse, sitev1.ReasonWaitingForBootstrapData, 30*time.Second)
	if em.Status.Host != "" || len(s.hostsOf(em.Name)) > 0 {
		t.Fatalf("machine without bootstrap data claimed host %q (%v)", em.Status.Host, s.hostsOf(em.Name))
	}
	if !slices.Contains(em.Finalizers, sitev1.EdgeMachineFinalizer) {
		t.Errorf("finalizers %v lack %s", em.Finalizers, sitev1.EdgeMachineFinalizer)
	}

	// The bootstrap provider is done: the Machine gets its data Secret.
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: em.Name}}
	controlplane.Update(t, s.c, m, func(m *clusterv1.Machine) { m.Spec.Bootstrap.DataSecretName = ptr.To(s.bootstrap) })
	start := time.Now()
	em = s.waitReady(em.Name, metav1.ConditionTrue, sitev1.ReasonHostProvisioned, provisionTimeout)
	t.Logf("provisioned %s after the bootstrap data came", time.Since(start).Round(100*time.Millisecond))
	s.checkProvisioned(em, "node-b")
	for _, name := range []string{"node-a", "node-c"} {
		if h := s.getHost(name); h.Spec.ConsumerRef != nil || h.Spec.Image != nil {
			t.Errorf("host %s was touched: consumerRef %+v, image %+v", name, h.Spec.ConsumerRef, h.Spec.Image)
		}
	}
}

// TestBindByLabels: four machines select role=worker among three worker hosts and one
// control-plane host, claiming in parallel. Each of three gets a distinct worker host, which
// Metal3 provisions; the fourth stays NoMatchingHost, naming its selector; the control-plane
// host stays free.
func TestBindByLabels(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	for i := range 3 {
		s.host(fmt.Sprintf("worker-%d", i), fmt.Sprintf("52:54:00:bb:00:%02x", i), map[string]string{"role": "worker"})
	}
	s.host("control-0", "52:54:00:bb:00:ff", map[string]string{"role": "control-plane"})
	workers := sitev1.HostSelector{MatchLabels: map[string]string{"role": "worker"}}
	names := []string{"md-0", "md-1", "md-2", "md-3"}
	for _, name := range names {
		s.machine(name, workers, "", false)
	}
	s.startManager()

	taken := map[string]string{} // host -> machine
	var waiting []string
	testutil.Eventually(t, provisionTimeout, func() error {
		clear(taken)
		waiting = waiting[:0]
		for _, name := range names {
			em, err := s.getMachine(name)
			if err != nil {
				return err
			}
			c := ready(em)
			switch {
			case c != nil && c.Reason == sitev1.ReasonHostProvisioned:
				if other, dup := taken[em.Status.Host]; dup {
					return fmt.Errorf("machines %s and %s both on host %s", other, name, em.Status.Host)
				}
				taken[em.Status.Host] = name
			case c != nil && c.Reason == sitev1.ReasonNoHost:
				waiting = append(waiting, name)
			case c != nil && c.Reason == sitev1.ReasonHostError:
				t.Fatalf("machine %s: Ready %s", name, describe(c)) // no host fails in this test
			default:
				return fmt.Errorf("machine %s: Ready %s", name, describe(c))
			}
		}
		if len(taken) != 3 || len(waiting) != 1 {
			return fmt.Errorf("%d machines provisioned (%v), %d waiting for a host (%v); want 3 and 1", len(taken), taken, len(waiting), waiting)
		}
		return nil
	})
	for host, name := range taken {
		if !strings.HasPrefix(host, "worker-") {
			t.Errorf("machine %s took host %s, not a worker", name, host)
		}
		em, err := s.getMachine(name)
		if err != nil {
			t.Fatal(err)
		}
		s.checkProvisioned(em, host)
		if got := s.hostsOf(name); len(got) != 1 {
			t.Errorf("machine %s is the consumer of hosts %v, want exactly one", name, got)
		}
	}
	em, err := s.getMachine(waiting[0])
	if err != nil {
		t.Fatal(err)
	}
	if msg := ready(em).Message; !strings.Contains(msg, "matchLabels {role=worker}") {
		t.Errorf("NoMatchingHost message %q does not name the selector", msg)
	}
	if em.Status.Host != "" || len(s.hostsOf(em.Name)) != 0 || ptr.Deref(em.Status.Initialization.Provisioned, false) {
		t.Errorf("machine %s without a host: status.host %q, hosts %v, provisioned %v", em.Name, em.Status.Host, s.hostsOf(em.Name), em.Status.Initialization.Provisioned)
	}
	if h := s.getHost("control-0"); h.Spec.ConsumerRef != nil {
		t.Errorf("control-plane host claimed by %+v", h.Spec.ConsumerRef)
	}
}

// TestDelete deletes machines and checks what becomes of their hosts: Deprovision (the
// default) wipes the host back to available, clears image, user data and consumerRef, powers
// it off, and lets the machine go only then (the next machine powers it on again); Keep leaves
// the host provisioned and online and only clears the consumerRef; a machine without a host, or whose host is gone, goes at once.
func TestDelete(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy sitev1.HostRemovalPolicy
		check  func(t *testing.T, h *metal3api.BareMetalHost)
	}{
		{"deprovision", "", func(t *testing.T, h *metal3api.BareMetalHost) {
			// Checked the moment the machine is gone: the provider waited for Metal3.
			if st := h.Status.Provisioning.State; st != metal3api.StateAvailable {
				t.Errorf("host %s is %q when its machine is gone, want available", h.Name, st)
			}
			if h.Spec.Image != nil || h.Spec.UserData != nil || h.Spec.ConsumerRef != nil {
				t.Errorf("host %s keeps image %+v, userData %+v, consumerRef %+v", h.Name, h.Spec.Image, h.Spec.UserData, h.Spec.ConsumerRef)
			}
			if h.Spec.Online {
				t.Errorf("wiped host %s is left online", h.Name)
			}
		}},
		{"keep", sitev1.RemovalKeep, func(t *testing.T, h *metal3api.BareMetalHost) {
			if st := h.Status.Provisioning.State; st != metal3api.StateProvisioned {
				t.Errorf("host %s is %q, want it left provisioned", h.Name, st)
			}
			if h.Spec.ConsumerRef != nil {
				t.Errorf("host %s still claimed by %+v", h.Name, h.Spec.ConsumerRef)
			}
			if h.Spec.Image == nil || h.Spec.UserData == nil {
				t.Errorf("host %s lost its image %+v or user data %+v", h.Name, h.Spec.Image, h.Spec.UserData)
			}
			if !h.Spec.Online {
				t.Errorf("kept host %s was switched off", h.Name)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t)
			s.host("node-0", "52:54:00:cc:00:00", nil)
			em := s.machine("m-0", sitev1.HostSelector{BootMACAddress: "52:54:00:cc:00:00"}, tt.policy, false)
			s.startManager()
			s.waitReady(em.Name, metav1.ConditionTrue, sitev1.ReasonHostProvisioned, provisionTimeout)

			start := time.Now()
			if err := s.c.Delete(t.Context(), em); err != nil {
				t.Fatal(err)
			}
			var h *metal3api.BareMetalHost
			testutil.Eventually(t, provisionTimeout, func() error {
				em, err := s.getMachine(em.Name)
				if err == nil {
					return fmt.Errorf("EdgeMachine still there: Ready %s, host state %s", describe(ready(em)), em.Status.ProvisioningState)
				}
				if client.IgnoreNotFound(err) != nil {
					return err
				}
				h = s.getHost("node-0")
				return nil
			})
			t.Logf("machine gone %s after delete", time.Since(start).Round(100*time.Millisecond))
			tt.check(t, h)
			if tt.policy == sitev1.RemovalKeep {
				return
			}
			// Metal3 switches the wiped host off.
			testutil.Eventually(t, provisionTimeout, func() error {
				if h := s.getHost("node-0"); h.Status.PoweredOn {
					return fmt.Errorf("host %s (online %v, %s) still powered on", h.Name, h.Spec.Online, h.Status.Provisioning.State)
				}
				return nil
			})
			// The released host is free for the next machine, which powers it on again.
			next := s.machine("m-1", sitev1.HostSelector{BootMACAddress: "52:54:00:cc:00:00"}, "", false)
			next = s.waitReady(next.Name, metav1.ConditionTrue, sitev1.ReasonHostProvisioned, provisionTimeout)
			s.checkProvisioned(next, "node-0")
		})
	}

	t.Run("no host", func(t *testing.T) {
		t.Parallel()
		s := newSite(t)
		em := s.machine("m-0", sitev1.HostSelector{BootMACAddress: "52:54:00:cc:ff:ff"}, "", false)
		s.startManager()
		em = s.waitReady(em.Name, metav1.ConditionFalse, sitev1.ReasonNoHost, 30*time.Second)
		if !strings.Contains(ready(em).Message, "bootMACAddress 52:54:00:cc:ff:ff") {
			t.Errorf("NoMatchingHost message %q does not name the boot MAC", ready(em).Message)
		}
		if err := s.c.Delete(t.Context(), em); err != nil {
			t.Fatal(err)
		}
		s.waitGone(em.Name, 10*time.Second)
	})

	t.Run("host gone", func(t *testing.T) {
		t.Parallel()
		s := newSite(t)
		em := s.machine("m-0", sitev1.HostSelector{BootMACAddress: "52:54:00:cc:ff:fe"}, "", false)
		s.startManager()
		em = s.waitReady(em.Name, metav1.ConditionFalse, sitev1.ReasonNoHost, 30*time.Second)
		// As if the machine had been bound to a host that was deleted since.
		controlplane.UpdateStatus(t, s.c, em, func(em *sitev1.EdgeMachine) { em.Status.Host = "deleted-host" })
		s.waitReady(em.Name, metav1.ConditionFalse, sitev1.ReasonHostError, 10*time.Second)
		if err := s.c.Delete(t.Context(), em); err != nil {
			t.Fatal(err)
		}
		s.waitGone(em.Name, 10*time.Second)
	})
}

// TestHostError: Metal3 refuses a host whose BMC credentials lack the password (a registration
// error). The machine bound to it reports Ready=False HostError with Metal3's own message and
// the host's name; the machines on the other hosts provision all the same.
func TestHostError(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.hostNS, Name: "no-password"},
		Data:       map[string][]byte{"username": []byte("admin")},
	})
	bad := s.host("broken", "52:54:00:dd:00:ff", nil)
	controlplane.Update(t, s.c, bad, func(bad *metal3api.BareMetalHost) { bad.Spec.BMC.CredentialsName = "no-password" })
	for i := range 2 {
		s.host(fmt.Sprintf("node-%d", i), fmt.Sprintf("52:54:00:dd:00:%02x", i), nil)
	}
	s.machine("m-broken", sitev1.HostSelector{BootMACAddress: "52:54:00:dd:00:ff"}, "", false)
	s.machine("m-0", sitev1.HostSelector{BootMACAddress: "52:54:00:dd:00:00"}, "", false)
	s.machine("m-1", sitev1.HostSelector{BootMACAddress: "52:54:00:dd:00:01"}, "", false)
	s.startManager()

	em := s.waitReady("m-broken", metav1.ConditionFalse, sitev1.ReasonHostError, provisionTimeout)
	h := s.getHost("broken")
	msg := ready(em).Message
	if h.Status.ErrorMessage == "" || !strings.Contains(msg, h.Status.ErrorMessage) || !strings.Contains(msg, "broken") {
		t.Errorf("HostError message %q lacks Metal3's error %q or the host name", msg, h.Status.ErrorMessage)
	}
	if !strings.Contains(msg, "password") {
		t.Errorf("HostError message %q does not say what Metal3 found wrong", msg)
	}
	t.Logf("HostError: %s", msg)
	for i := range 2 {
		name := fmt.Sprintf("m-%d", i)
		em := s.waitReady(name, metav1.ConditionTrue, sitev1.ReasonHostProvisioned, provisionTimeout)
		s.checkProvisioned(em, fmt.Sprintf("node-%d", i))
	}
	if em, err := s.getMachine("m-broken"); err != nil || ptr.Deref(em.Status.Initialization.Provisioned, false) {
		t.Errorf("machine on the broken host: %v, provisioned %v", err, em.Status.Initialization.Provisioned)
	}
}

// TestRestart stops the provider after it claimed a host, before Metal3 provisioned it, and
// starts a new one: the machine keeps the same host and no other host is claimed, whether its
// status recorded the host ("status saved") or the claim never made it into status ("status
// lost", a crash between the two writes). Three hosts carry the machine's labels, so a second
// claim would find a free one.
func TestRestart(t *testing.T) {
	t.Parallel()
	for _, lose := range []bool{false, true} {
		name := "status saved"
		if lose {
			name = "status lost"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t)
			for i := range 3 {
				s.host(fmt.Sprintf("worker-%d", i), fmt.Sprintf("52:54:00:ee:00:%02x", i), map[string]string{"role": "worker"})
			}
			em := s.machine("md-0", sitev1.HostSelector{MatchLabels: map[string]string{"role": "worker"}}, "", false)
			stop := s.startManager()

			var claimed string
			testutil.Eventually(t, provisionTimeout, func() error {
				em, err := s.getMachine(em.Name)
				if err != nil {
					return err
				}
				if hosts := s.hostsOf(em.Name); em.Status.Host == "" || len(hosts) != 1 {
					return fmt.Errorf("not claimed yet: status.host %q, hosts %v, Ready %s", em.Status.Host, hosts, describe(ready(em)))
				}
				claimed = em.Status.Host
				return nil
			})
			stop()
			if st := s.getHost(claimed).Status.Provisioning.State; st == metal3api.StateProvisioned {
				t.Fatalf("host %s already provisioned when the provider stopped: nothing tested", claimed)
			}
			if lose {
				em, err := s.getMachine(em.Name)
				if err != nil {
					t.Fatal(err)
				}
				em.Status = sitev1.EdgeMachineStatus{}
				if err := s.c.Status().Update(t.Context(), em); err != nil {
					t.Fatal(err)
				}
			}

			s.startManager()
			em = s.waitReady(em.Name, metav1.ConditionTrue, sitev1.ReasonHostProvisioned, provisionTimeout)
			s.checkProvisioned(em, claimed)
			if hosts := s.hostsOf(em.Name); len(hosts) != 1 || hosts[0] != claimed {
				t.Errorf("after the restart the machine is the consumer of %v, want only %s", hosts, claimed)
			}
		})
	}
}

// TestPaused: while its Cluster is paused, a machine claims no host and reports only the
// Paused condition, True/Paused (Cluster-API's v1beta2 contract); unpaused it reports
// False/NotPaused and claims its host. The paused annotation on the machine does the same:
// deleting a paused machine leaves its host claimed until the annotation goes.
func TestPaused(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	s.host("node-0", "52:54:00:ab:00:00", nil)
	controlplane.Update(t, s.c, s.cluster, func(cl *clusterv1.Cluster) { cl.Spec.Paused = ptr.To(true) })
	em := s.machine("m-0", sitev1.HostSelector{BootMACAddress: "52:54:00:ab:00:00"}, "", false)
	s.startManager()

	em = s.waitPaused(em.Name, metav1.ConditionTrue, clusterv1.PausedReason, "Cluster spec.paused")
	testutil.Consistently(t, 3*time.Second, func() error {
		em, err := s.getMachine(em.Name)
		if err != nil {
			return err
		}
		if len(em.Status.Conditions) != 1 || em.Status.Host != "" || len(em.Finalizers) != 0 || len(s.hostsOf(em.Name)) != 0 {
			return fmt.Errorf("machine of a paused Cluster was reconciled: finalizers %v, status %+v, hosts %v", em.Finalizers, em.Status, s.hostsOf(em.Name))
		}
		return nil
	})

	controlplane.Update(t, s.c, s.cluster, func(cl *clusterv1.Cluster) { cl.Spec.Paused = ptr.To(false) })
	s.waitPaused(em.Name, metav1.ConditionFalse, clusterv1.NotPausedReason, "")
	testutil.Eventually(t, 30*time.Second, func() error {
		if hosts := s.hostsOf(em.Name); len(hosts) != 1 {
			return fmt.Errorf("unpaused machine claimed hosts %v, want node-0", hosts)
		}
		return nil
	})

	controlplane.Update(t, s.c, em, func(em *sitev1.EdgeMachine) {
		em.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	})
	s.waitPaused(em.Name, metav1.ConditionTrue, clusterv1.PausedReason, "EdgeMachine has the cluster.x-k8s.io/paused annotation")
	if err := s.c.Delete(t.Context(), em); err != nil {
		t.Fatal(err)
	}
	testutil.Consistently(t, 3*time.Second, func() error {
		if _, err := s.getMachine(em.Name); err != nil {
			return fmt.Errorf("paused machine was deleted: %w", err)
		}
		if hosts := s.hostsOf(em.Name); len(hosts) != 1 {
			return fmt.Errorf("paused machine gave its host back: claims %v", hosts)
		}
		return nil
	})
	controlplane.Update(t, s.c, em, func(em *sitev1.EdgeMachine) { delete(em.Annotations, clusterv1.PausedAnnotation) })
	s.waitGone(em.Name, provisionTimeout)
	if hosts := s.hostsOf(em.Name); len(hosts) != 0 {
		t.Errorf("deleted machine still claims %v", hosts)
	}
}
