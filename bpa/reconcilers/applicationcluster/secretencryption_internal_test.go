package applicationcluster

import (
	"cmp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/bpa/cluster"
	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/encryption"
)

// TestSecretEncryptionStatus: what a run's key state becomes in status.bootstrap — the phase
// with the time it began (kept while the phase lasts), the message saying what the phase does,
// another pass asked for while a rotation is not done, an event when Secrets were stored again.
func TestSecretEncryptionStatus(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name      string
		was       *sitev1.SecretEncryptionStatus
		run       pki.SecretEncryption
		asked     int64
		reenc     *encryption.Result
		want      sitev1.SecretEncryptionStatus // Since checked apart
		since     string                        // "none", "kept" or "new"
		again     bool
		message   string
		lead      string // what the message says is under way; "" for a rotation
		wantEvent bool
	}{
		{name: "no API server", run: pki.SecretEncryption{}},
		{name: "installed, Secrets stored under the key", run: pki.SecretEncryption{Key: "bpa-1", Reencrypted: "bpa-1"}, reenc: &encryption.Result{Rewritten: 4},
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, Key: "bpa-1", Reencrypted: "bpa-1"}, since: "none", wantEvent: true},
		{name: "rotation asked, not started yet", was: &sitev1.SecretEncryptionStatus{Key: "bpa-1", Reencrypted: "bpa-1"}, run: pki.SecretEncryption{Key: "bpa-1", Reencrypted: "bpa-1"}, asked: 1,
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, Key: "bpa-1", Reencrypted: "bpa-1"}, since: "none", again: true, message: "(0 of 1 rotations done): the next rotation starts"},
		{name: "phase begins", was: &sitev1.SecretEncryptionStatus{Key: "bpa-1", Reencrypted: "bpa-1"}, run: pki.SecretEncryption{Key: "bpa-2", Phase: pki.RotationUseNew, Reencrypted: "bpa-1"}, asked: 1,
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, Key: "bpa-2", Phase: sitev1.RotationUseNew, Reencrypted: "bpa-1"}, since: "new", again: true, message: "key bpa-2 encrypts; every Secret is stored again under it"},
		{name: "phase goes on", was: &sitev1.SecretEncryptionStatus{Key: "bpa-2", Phase: sitev1.RotationDropOld, Since: &earlier}, run: pki.SecretEncryption{Key: "bpa-2", Phase: pki.RotationDropOld, Reencrypted: "bpa-2"}, asked: 1,
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, Key: "bpa-2", Phase: sitev1.RotationDropOld, Reencrypted: "bpa-2"}, since: "kept", again: true, message: "the old key goes from every API server"},
		{name: "rotation done", was: &sitev1.SecretEncryptionStatus{Key: "bpa-2", Phase: sitev1.RotationDropOld, Since: &earlier}, run: pki.SecretEncryption{Key: "bpa-2", Generation: 1, Reencrypted: "bpa-2"}, asked: 1,
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, Key: "bpa-2", Rotations: 1, Reencrypted: "bpa-2"}, since: "none"},
		{name: "through the KMS plugin", run: pki.SecretEncryption{KMS: true, Key: pki.KMSProviderName, Reencrypted: pki.KMSProviderName}, reenc: &encryption.Result{Rewritten: 2},
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionKMS, Key: pki.KMSProviderName, Reencrypted: pki.KMSProviderName}, since: "none", wantEvent: true},
		{name: "moving to the KMS plugin: it decrypts too", was: &sitev1.SecretEncryptionStatus{Key: "bpa-1", Reencrypted: "bpa-1"}, run: pki.SecretEncryption{MovingToKMS: true, Key: "bpa-1", Phase: pki.RotationAddNew, Reencrypted: "bpa-1"},
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionSecretbox, To: sitev1.SecretEncryptionKMS, Key: "bpa-1", Phase: sitev1.RotationAddNew, Reencrypted: "bpa-1"}, since: "new", again: true,
			lead: "moving the Secrets to the KMS plugin (Vault)", message: "every API server gets the plugin (one at a time), key bpa-1 still encrypts"},
		{name: "moving to the KMS plugin: it encrypts", was: &sitev1.SecretEncryptionStatus{Key: "bpa-1", Phase: sitev1.RotationAddNew, To: sitev1.SecretEncryptionKMS, Since: &earlier},
			run: pki.SecretEncryption{MovingToKMS: true, Key: pki.KMSProviderName, Phase: pki.RotationUseNew, Reencrypted: pki.KMSProviderName}, reenc: &encryption.Result{Rewritten: 7},
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionKMS, To: sitev1.SecretEncryptionKMS, Key: pki.KMSProviderName, Phase: sitev1.RotationUseNew, Reencrypted: pki.KMSProviderName}, since: "new", again: true,
			lead: "moving the Secrets to the KMS plugin (Vault)", message: "the plugin encrypts", wantEvent: true},
		{name: "moved, with the rotations its secretbox key had", was: &sitev1.SecretEncryptionStatus{Key: pki.KMSProviderName, Phase: sitev1.RotationDropOld, To: sitev1.SecretEncryptionKMS, Since: &earlier},
			run: pki.SecretEncryption{KMS: true, Key: pki.KMSProviderName, Generation: 2, Reencrypted: pki.KMSProviderName}, asked: 2,
			want: sitev1.SecretEncryptionStatus{Provider: sitev1.SecretEncryptionKMS, Key: pki.KMSProviderName, Rotations: 2, Reencrypted: pki.KMSProviderName}, since: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(4)
			w := &work{r: &Reconciler{Recorder: rec}, ac: &sitev1.ApplicationCluster{}, st: &sitev1.BootstrapStatus{Message: "5 nodes run it", SecretEncryption: tc.was}}
			again := w.secretEncryption(&cluster.Result{SecretEncryption: tc.run, Reencrypted: tc.reenc}, tc.asked)
			if again != tc.again {
				t.Errorf("another pass asked for: %v, want %v", again, tc.again)
			}
			if tc.run.Key == "" {
				if w.st.SecretEncryption != tc.was {
					t.Errorf("status changed to %+v without an API server", w.st.SecretEncryption)
				}
				return
			}
			got := *w.st.SecretEncryption
			since := got.Since
			got.Since = nil
			if got != tc.want {
				t.Errorf("status %+v, want %+v", got, tc.want)
			}
			switch tc.since {
			case "none":
				if since != nil {
					t.Errorf("since %v, want none outside a phase", since)
				}
			case "kept":
				if since == nil || !since.Equal(&earlier) {
					t.Errorf("since %v, want the phase's start kept (%v)", since, earlier)
				}
			case "new":
				if since == nil || time.Since(since.Time) > time.Minute {
					t.Errorf("since %v, want now", since)
				}
			}
			if tc.message == "" && w.st.Message != "5 nodes run it" {
				t.Errorf("message %q, want it unchanged", w.st.Message)
			}
			if lead := "5 nodes run it; " + cmp.Or(tc.lead, "rotating the Secret encryption key"); tc.message != "" && (!strings.HasPrefix(w.st.Message, lead) || !strings.Contains(w.st.Message, tc.message)) {
				t.Errorf("message %q, want %q said after the nodes: %q", w.st.Message, lead, tc.message)
			}
			if got := len(rec.Events); got != map[bool]int{true: 1, false: 0}[tc.wantEvent] {
				t.Errorf("%d events, want event %v", got, tc.wantEvent)
			}
		})
	}
}
