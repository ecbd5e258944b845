package metal3_test

import (
	"crypto/rand"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/ironic"
	"github.com/edgefleet/edgefleet/test/metal3"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestMetal3WithRealIronicRefusesAnUnreachableBMC runs baremetal-operator against real Ironic
// (no test mode) and registers a BareMetalHost whose BMC address does not answer: the operator
// enrolls the node in Ironic, Ironic cannot reach the BMC, and the host stays in registering
// with a registration error naming the address — never available.
func TestMetal3WithRealIronicRefusesAnUnreachableBMC(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{Name: "site-ironic"})
	ns := cp.Namespace(t)
	ir := ironic.StartT(t, ironic.Options{})
	m3 := metal3.StartT(t, cp, metal3.Options{Namespaces: []string{ns}, Ironic: &metal3.Ironic{URL: ir.URL, User: ir.User, Password: ir.Password}})
	ctx := t.Context()
	c := m3.Client

	// A port nothing listens on: taken, then given back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := l.Addr().String()
	l.Close()

	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bmc-credentials"},
		Data:       map[string][]byte{"username": []byte("admin"), "password": []byte(rand.Text())},
	}
	if err := c.Create(ctx, creds); err != nil {
		t.Fatal(err)
	}
	bmh := &metal3api.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "silent-bmc"},
		Spec: metal3api.BareMetalHostSpec{
			BootMACAddress:        "52:54:00:00:01:01",
			InspectionMode:        metal3api.InspectionModeDisabled,
			AutomatedCleaningMode: metal3api.CleaningModeDisabled,
			BMC: metal3api.BMCDetails{
				Address:         "redfish+http://" + silent + "/redfish/v1/Systems/1",
				CredentialsName: creds.Name,
			},
		},
	}
	if err := c.Create(ctx, bmh); err != nil {
		t.Fatal(err)
	}
	var last metal3api.BareMetalHostStatus
	testutil.WaitFor(t, 3*time.Minute, "host "+bmh.Name+" with a registration error", func() (bool, string) {
		if err := c.Get(ctx, clientKey(ns, bmh.Name), bmh); err != nil {
			return false, err.Error()
		}
		last = bmh.Status
		if s := bmh.Status.Provisioning.State; s != "" && s != metal3api.StateRegistering {
			t.Fatalf("host %s went on to %q with a BMC that does not answer: %+v", bmh.Name, s, bmh.Status)
		}
		return bmh.Status.ErrorType == metal3api.RegistrationError, fmt.Sprintf("state %q, error %q %q\n%s", bmh.Status.Provisioning.State, bmh.Status.ErrorType, bmh.Status.ErrorMessage, m3.LogLines(bmh.Name, 10))
	})
	if !strings.Contains(last.ErrorMessage, silent) {
		t.Errorf("host %s: registration error %q does not name the BMC's address %s", bmh.Name, last.ErrorMessage, silent)
	}
	t.Logf("host %s: %s: %s", bmh.Name, last.ErrorType, last.ErrorMessage)
}
