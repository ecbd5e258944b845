package metal3_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestMetal3ProvisionsHosts starts a site's control plane and Metal3's baremetal-operator in
// test mode, registers two BareMetalHosts with BMC credentials, a boot MAC and an image, and
// waits until the operator's state machine has taken both to provisioned.
func TestMetal3ProvisionsHosts(t *testing.T) {
	start := time.Now()
	cp := controlplane.StartT(t, controlplane.Options{Name: "site-metal3"})
	ns := cp.Namespace(t)
	cpReady := time.Now()
	m3 := metal3.StartT(t, cp, metal3.Options{Namespaces: []string{ns}})
	t.Logf("control plane ready in %s, then CRDs, RBAC and baremetal-operator ready in %s",
		cpReady.Sub(start).Round(10*time.Millisecond), time.Since(cpReady).Round(10*time.Millisecond))
	ctx := t.Context()
	c := m3.Client

	password := make([]byte, 16)
	if _, err := rand.Read(password); err != nil {
		t.Fatal(err)
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-credentials"},
		Data:       map[string][]byte{"username": []byte("admin"), "password": []byte(hex.EncodeToString(password))},
	}
	if err := c.Create(ctx, creds); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("edge-os image"))
	image := metal3api.Image{
		URL:          "http://127.0.0.1:8080/images/edge-os.qcow2",
		Checksum:     hex.EncodeToString(sum[:]),
		ChecksumType: metal3api.SHA256,
	}
	hosts := []string{"node-0", "node-1"}
	created := time.Now()
	for i, name := range hosts {
		bmh := &metal3api.BareMetalHost{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: metal3api.BareMetalHostSpec{
				Online:         true,
				BootMACAddress: fmt.Sprintf("52:54:00:00:00:%02x", i),
				BMC: metal3api.BMCDetails{
					Address:         "redfish+http://127.0.0.1:8000/redfish/v1/Systems/" + name,
					CredentialsName: creds.Name,
				},
				Image: image.DeepCopy(),
			},
		}
		if err := c.Create(ctx, bmh); err != nil {
			t.Fatalf("create BareMetalHost %s: %v", name, err)
		}
	}

	// A host whose credentials Secret does not exist must stay short of provisioning, with the
	// operator's own error: proof that the operator, not the test, decides the states.
	orphan := &metal3api.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-credentials"},
		Spec: metal3api.BareMetalHostSpec{
			Online:         true,
			BootMACAddress: "52:54:00:00:00:ff",
			BMC:            metal3api.BMCDetails{Address: "redfish+http://127.0.0.1:8000/redfish/v1/Systems/x", CredentialsName: "missing"},
			Image:          image.DeepCopy(),
		},
	}
	if err := c.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}

	seen := map[string][]metal3api.ProvisioningState{} // states polled, in order
	testutil.Eventually(t, 3*time.Minute, func() error {
		var errs []error
		for _, name := range hosts {
			bmh := &metal3api.BareMetalHost{}
			if err := c.Get(ctx, clientKey(ns, name), bmh); err != nil {
				return err
			}
			state := bmh.Status.Provisioning.State
			if n := len(seen[name]); n == 0 || seen[name][n-1] != state {
				seen[name] = append(seen[name], state)
			}
			// The operator powers a host on in the reconcile after it reached provisioned.
			if state != metal3api.StateProvisioned || !bmh.Status.PoweredOn {
				errs = append(errs, fmt.Errorf("host %s is %q (powered on: %t), not provisioned and on", name, state, bmh.Status.PoweredOn))
			}
		}
		return errors.Join(errs...)
	})
	provisionedBy := time.Now()
	t.Logf("2 hosts provisioned and powered on %s after they were created", time.Since(created).Round(10*time.Millisecond))

	for _, name := range hosts {
		bmh := &metal3api.BareMetalHost{}
		if err := c.Get(ctx, clientKey(ns, name), bmh); err != nil {
			t.Fatal(err)
		}
		st := bmh.Status
		if st.OperationalStatus != metal3api.OperationalStatusOK {
			t.Errorf("host %s: operational status %q, want OK (error %q)", name, st.OperationalStatus, st.ErrorMessage)
		}
		if st.Provisioning.Image.URL != image.URL || st.Provisioning.Image.Checksum != image.Checksum {
			t.Errorf("host %s: provisioned image %+v, want %+v", name, st.Provisioning.Image, image)
		}
		if st.Provisioning.BootMode == "" {
			t.Errorf("host %s: no boot mode in the provisioning status", name)
		}
		// Inspection ran: the operator stores the fixture's hardware details in a HardwareData.
		hd := &metal3api.HardwareData{}
		if err := c.Get(ctx, clientKey(ns, name), hd); err != nil {
			t.Errorf("host %s: HardwareData from inspection: %v", name, err)
		} else if hd.Spec.HardwareDetails == nil || len(hd.Spec.HardwareDetails.NIC) == 0 {
			t.Errorf("host %s: HardwareData without NICs: %+v", name, hd.Spec)
		}
		t.Logf("host %s went through %q", name, seen[name])
	}

	// The operator labels the credentials Secret it uses, so its cache sees it.
	if err := c.Get(ctx, clientKey(ns, creds.Name), creds); err != nil {
		t.Fatal(err)
	}
	if creds.Labels["environment.metal3.io"] != "baremetal" {
		t.Errorf("credentials Secret labels %v: the operator did not take it into use", creds.Labels)
	}

	if err := c.Get(ctx, clientKey(ns, orphan.Name), orphan); err != nil {
		t.Fatal(err)
	}
	if st := orphan.Status; st.Provisioning.State == metal3api.StateProvisioned || st.ErrorType == "" {
		t.Errorf("host without credentials: state %q, error type %q %q; want it held back with an error",
			st.Provisioning.State, st.ErrorType, st.ErrorMessage)
	} else {
		t.Logf("host without credentials: state %q, operational status %q, error %q: %s",
			st.Provisioning.State, st.OperationalStatus, st.ErrorType, st.ErrorMessage)
	}

	// The bed nudges a host on its way somewhere, here the one held back in registering, and
	// the operator reconciles it at each nudge whatever its backoff: count the operator's
	// "start" of a reconcile of that host across two nudges. Hosts at rest (provisioned) are
	// left alone.
	reconciles := func() int {
		return strings.Count(m3.LogLines(`"baremetalhost":{"name":"`+orphan.Name+`","namespace":"`+ns+`"}`, 1<<20), `"msg":"start"`)
	}
	nudges := map[string]bool{}
	before := reconciles()
	testutil.Eventually(t, 4*metal3.NudgeInterval, func() error {
		if err := c.Get(ctx, clientKey(ns, orphan.Name), orphan); err != nil {
			return err
		}
		if v := orphan.Annotations[metal3.NudgeAnnotation]; v != "" {
			nudges[v] = true
		}
		if len(nudges) < 2 {
			return fmt.Errorf("%s nudged %d times, want 2", orphan.Name, len(nudges))
		}
		if after := reconciles(); after < before+2 {
			return fmt.Errorf("%s reconciled %d times across its nudges, want 2 or more", orphan.Name, after-before)
		}
		return nil
	})
	for _, name := range hosts {
		bmh := &metal3api.BareMetalHost{}
		if err := c.Get(ctx, clientKey(ns, name), bmh); err != nil {
			t.Fatal(err)
		}
		if v, ok := bmh.Annotations[metal3.NudgeAnnotation]; ok && bmh.Status.Provisioning.State == metal3api.StateProvisioned {
			if at, err := time.Parse(time.RFC3339Nano, v); err != nil || at.After(provisionedBy) {
				t.Errorf("host %s nudged at %s, after it was provisioned: hosts at rest must be left alone", name, v)
			}
		}
	}
}

func clientKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
