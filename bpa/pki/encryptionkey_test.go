package pki_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"github.com/edgefleet/edgefleet/bpa/pki"
	"github.com/edgefleet/edgefleet/pkg/encryption"
)

// encryptionConfig is a control-plane member's encryption configuration: its providers, in
// order (the first encrypts), and the file itself.
func encryptionConfig(t *testing.T, b *pki.Bundle) ([]apiserverv1.ProviderConfiguration, []byte) {
	t.Helper()
	files, err := b.ControlPlaneFiles("cp-0")
	if err != nil {
		t.Fatal(err)
	}
	var enc apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(files[pki.EncryptionConfigFile], &enc); err != nil {
		t.Fatalf("%s: %v", pki.EncryptionConfigFile, err)
	}
	return enc.Resources[0].Providers, files[pki.EncryptionConfigFile]
}

// configKeys are the secretbox keys of a control-plane member's encryption configuration, in
// order (the first encrypts), and the configuration itself.
func configKeys(t *testing.T, b *pki.Bundle) ([]apiserverv1.Key, []byte) {
	t.Helper()
	p, file := encryptionConfig(t, b)
	if len(p) != 2 || p[0].Secretbox == nil || p[1].Identity == nil {
		t.Fatalf("%s: providers %+v, want secretbox then identity", pki.EncryptionConfigFile, p)
	}
	return p[0].Secretbox.Keys, file
}

func keyNames(keys []apiserverv1.Key) []string {
	var names []string
	for _, k := range keys {
		names = append(names, k.Name)
	}
	return names
}

// reencryptSpy stands in for encryption.Reencrypt against an API server: it counts its calls
// and fails while fail is set.
type reencryptSpy struct {
	calls int
	fail  error
}

func (r *reencryptSpy) reencrypt(context.Context) (encryption.Result, error) {
	r.calls++
	if r.fail != nil {
		return encryption.Result{Rewritten: 1}, r.fail
	}
	return encryption.Result{Rewritten: 3, Current: 2}, nil
}

// TestSecretEncryptionKeyRotation walks a rotation through its phases as the BPA does: Ensure
// gives the configuration of the phase, which is rolled out, then AdvanceSecretEncryption moves
// on. Each phase's key order is the one that keeps every API server able to read what any other
// wrote; the Secrets are stored again once under each key that encrypts; a failed
// re-encryption holds the rotation where it is; the old key goes only at the end.
func TestSecretEncryptionKeyRotation(t *testing.T) {
	ctx := context.Background()
	spy := newSpy()
	spec := testSpec()
	advance := func(t *testing.T, r *reencryptSpy) pki.SecretEncryption {
		t.Helper()
		st, _, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, r.reencrypt)
		if err != nil {
			t.Fatalf("AdvanceSecretEncryption: %v", err)
		}
		return st
	}

	b := ensure(t, spy, spec, t0)
	keys, _ := configKeys(t, b)
	if got := b.SecretEncryption(); got != (pki.SecretEncryption{Key: "bpa-1"}) || !slices.Equal(keyNames(keys), []string{"bpa-1"}) {
		t.Fatalf("new cluster: %+v, keys %v; want key bpa-1 alone, not re-encrypted yet", got, keyNames(keys))
	}
	old := keys[0]

	// The first pass stores every Secret under the key (those written in clear before
	// encryption was switched on), once.
	r := &reencryptSpy{}
	st, res, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, r.reencrypt)
	if err != nil || r.calls != 1 || res == nil || res.Rewritten != 3 || st != (pki.SecretEncryption{Key: "bpa-1", Reencrypted: "bpa-1"}) {
		t.Fatalf("first advance: %+v, %+v, %v after %d re-encryptions; want one, recorded", st, res, err, r.calls)
	}
	if st, res, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, r.reencrypt); err != nil || r.calls != 1 || res != nil || st.Reencrypted != "bpa-1" {
		t.Fatalf("second advance: %+v, %+v, %v after %d re-encryptions; want none more", st, res, err, r.calls)
	}

	// One rotation asked for: the new key is added, the old one still encrypts.
	spec.SecretEncryptionKeyRotations = 1
	b = ensure(t, spy, spec, t0)
	keys, addNew := configKeys(t, b)
	if got := b.SecretEncryption(); got.Phase != pki.RotationAddNew || got.Key != "bpa-1" || !slices.Equal(keyNames(keys), []string{"bpa-1", "bpa-2"}) || keys[0] != old {
		t.Fatalf("rotation asked: %+v, keys %v; want AddNew, the old bpa-1 first, then bpa-2", got, keyNames(keys))
	}
	if keys[1].Secret == old.Secret {
		t.Fatal("the new key is the old one")
	}
	next := keys[1]
	if _, again := configKeys(t, ensure(t, spy, spec, t0)); !bytes.Equal(again, addNew) {
		t.Fatal("a second Ensure in AddNew changed the configuration: the new key was made again")
	}

	// AddNew rolled out: the new key encrypts, the old still decrypts.
	if st := advance(t, r); st.Phase != pki.RotationUseNew || st.Key != "bpa-2" || r.calls != 1 {
		t.Fatalf("after AddNew: %+v after %d re-encryptions; want UseNew writing bpa-2, nothing re-encrypted yet", st, r.calls)
	}
	keys, _ = configKeys(t, ensure(t, spy, spec, t0))
	if !slices.Equal(keys, []apiserverv1.Key{next, old}) {
		t.Fatalf("UseNew: keys %v, want bpa-2 then bpa-1", keyNames(keys))
	}

	// UseNew rolled out: the Secrets are stored again under bpa-2. A failure holds the phase.
	r.fail = errors.New("the API server went away")
	if st, _, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, r.reencrypt); err == nil || !strings.Contains(err.Error(), "under key bpa-2") || st.Phase != pki.RotationUseNew {
		t.Fatalf("advance with the re-encryption failing: %+v, %v; want an error naming bpa-2, still UseNew", st, err)
	}
	if st := ensure(t, spy, spec, t0).SecretEncryption(); st.Phase != pki.RotationUseNew || st.Reencrypted != "bpa-1" {
		t.Fatalf("after the failed re-encryption the store says %+v, want UseNew, re-encrypted under bpa-1 only", st)
	}
	r.fail = nil
	if st := advance(t, r); st.Phase != pki.RotationDropOld || st.Reencrypted != "bpa-2" || r.calls != 3 {
		t.Fatalf("after UseNew: %+v after %d re-encryptions; want DropOld, re-encrypted under bpa-2", st, r.calls)
	}
	keys, dropOld := configKeys(t, ensure(t, spy, spec, t0))
	if !slices.Equal(keys, []apiserverv1.Key{next}) {
		t.Fatalf("DropOld: keys %v, want bpa-2 alone", keyNames(keys))
	}

	// DropOld rolled out: the rotation is over; the configuration stays as it is (no restart).
	if st := advance(t, r); st != (pki.SecretEncryption{Generation: 1, Key: "bpa-2", Reencrypted: "bpa-2"}) || r.calls != 3 {
		t.Fatalf("after DropOld: %+v after %d re-encryptions; want generation 1, key bpa-2, done", st, r.calls)
	}
	b = ensure(t, spy, spec, t0)
	if _, done := configKeys(t, b); !bytes.Equal(done, dropOld) {
		t.Error("the configuration changed when the rotation ended: the API servers would restart for nothing")
	}
	stored := spy.stored(t, secretName)
	for _, k := range []string{"secretbox.next.key", "secretbox.next.sha256", "secretbox.rotation"} {
		if _, ok := stored[k]; ok {
			t.Errorf("%s is still stored after the rotation", k)
		}
	}
	if string(stored["secretbox.key"]) != next.Secret || bytes.Contains(bytes.Join(mapValues(stored), nil), []byte(old.Secret)) {
		t.Error("after the rotation the stored key is not the new one, or the old key is still stored")
	}
	if st := advance(t, r); st.Phase != "" || r.calls != 3 {
		t.Fatalf("advance with nothing to do: %+v after %d re-encryptions", st, r.calls)
	}

	// Two more asked for at once: they run one after the other, each with a new name.
	spec.SecretEncryptionKeyRotations = 3
	keys, _ = configKeys(t, ensure(t, spy, spec, t0))
	if !slices.Equal(keyNames(keys), []string{"bpa-2", "bpa-3"}) {
		t.Fatalf("second rotation: keys %v, want bpa-2 then bpa-3", keyNames(keys))
	}
	for range 3 {
		advance(t, r)
	}
	b = ensure(t, spy, spec, t0)
	if st := b.SecretEncryption(); st.Generation != 2 || st.Phase != pki.RotationAddNew || st.Key != "bpa-3" {
		t.Fatalf("after the second rotation: %+v, want generation 2 and the third rotation started", st)
	}
}

func mapValues(m map[string][]byte) [][]byte {
	var out [][]byte
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestSecretEncryptionKeyRotationRefusesDamage: a rotation's state that was damaged in the
// store is an error naming what to restore; no new key is made in place of a lost one.
func TestSecretEncryptionKeyRotationRefusesDamage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(map[string][]byte)
		want    string
	}{
		{"new key lost mid-rotation", func(d map[string][]byte) { delete(d, "secretbox.next.key") }, "secretbox.next.key is gone"},
		{"new key and its sum lost mid-rotation", func(d map[string][]byte) { delete(d, "secretbox.next.key"); delete(d, "secretbox.next.sha256") },
			"secretbox.next.key is gone from the secret store while a rotation is under way (secretbox.rotation is set)"},
		{"new key replaced mid-rotation", func(d map[string][]byte) { d["secretbox.next.key"] = d["secretbox.key"] }, "secretbox.next.key is not the key"},
		{"phase garbled", func(d map[string][]byte) { d["secretbox.rotation"] = []byte("Halfway") }, `secretbox.rotation is "Halfway", not a rotation phase`},
		{"generation garbled", func(d map[string][]byte) { d["secretbox.generation"] = []byte("-1") }, `secretbox.generation is "-1", not a count`},
		{"phase lost with the new key kept", func(d map[string][]byte) { delete(d, "secretbox.rotation") }, "secretbox.next.key is stored, but no rotation is under way"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spy := newSpy()
			spec := testSpec()
			spec.SecretEncryptionKeyRotations = 1
			ensure(t, spy, spec, t0)
			d := spy.stored(t, secretName)
			tc.corrupt(d)
			if err := spy.Store.Put(context.Background(), secretName, d); err != nil {
				t.Fatal(err)
			}
			puts := spy.puts
			spec.SecretEncryptionKeyRotations = 0 // nothing more asked: the stored rotation alone must be checked
			if _, err := pki.Ensure(context.Background(), spy, secretName, spec, clock(t0)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Ensure: %v, want %q", err, tc.want)
			}
			if spy.puts != puts {
				t.Error("Ensure wrote over the damaged secret")
			}
		})
	}
}

// TestSecretEncryptionKMS: a PKI made for a cluster whose Secrets are encrypted through the KMS
// plugin names the plugin's provider alone and holds no secretbox key; re-encryption runs once;
// the provider never changes silently either way, and rotations are Vault's.
func TestSecretEncryptionKMS(t *testing.T) {
	ctx := context.Background()
	spy := newSpy()
	spec := testSpec()
	spec.SecretEncryptionKMS = true
	b := ensure(t, spy, spec, t0)
	if got := b.SecretEncryption(); got != (pki.SecretEncryption{KMS: true, Key: pki.KMSProviderName}) {
		t.Errorf("new KMS cluster: %+v", got)
	}
	p, _ := encryptionConfig(t, b)
	if len(p) != 2 || p[0].KMS == nil || p[0].KMS.APIVersion != "v2" || p[0].KMS.Name != pki.KMSProviderName ||
		p[0].KMS.Endpoint != "unix://"+pki.KMSSocket || p[1].Identity == nil {
		t.Errorf("providers %+v, want the KMS v2 plugin on %s, then identity", p, pki.KMSSocket)
	}
	stored, err := spy.Get(ctx, secretName)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := stored["secretbox.key"]; ok {
		t.Error("a KMS cluster's PKI holds a secretbox key")
	}

	r := &reencryptSpy{}
	for range 2 {
		st, _, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, r.reencrypt)
		if err != nil || st != (pki.SecretEncryption{KMS: true, Key: pki.KMSProviderName, Reencrypted: pki.KMSProviderName}) {
			t.Fatalf("advance: %+v, %v", st, err)
		}
	}
	if r.calls != 1 {
		t.Errorf("%d re-encryptions, want 1", r.calls)
	}

	refused := func(what string, spec pki.Spec, store pki.Store, want string) {
		t.Helper()
		before, _ := store.Get(ctx, secretName)
		_, err := pki.Ensure(ctx, store, secretName, spec, clock(t0))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", what, err, want)
		}
		if after, _ := store.Get(ctx, secretName); !maps.EqualFunc(before, after, bytes.Equal) {
			t.Errorf("%s changed the stored PKI", what)
		}
	}
	noKMS := spec
	noKMS.SecretEncryptionKMS = false
	refused("the KMS switched off", noKMS, spy, "give it --cluster-kms-vault-addr")
	rotate := spec
	rotate.SecretEncryptionKeyRotations = 1
	refused("a rotation asked of a KMS cluster", rotate, spy, "rotates its Vault transit key in Vault")
}

// providers are the providers of a control-plane member's encryption configuration, in order
// (the first encrypts), as "secretbox:<key>,…", "kms:<name>" and "identity".
func providers(t *testing.T, b *pki.Bundle) []string {
	t.Helper()
	configured, _ := encryptionConfig(t, b)
	var out []string
	for _, p := range configured {
		switch {
		case p.Secretbox != nil:
			out = append(out, "secretbox:"+strings.Join(keyNames(p.Secretbox.Keys), ","))
		case p.KMS != nil:
			out = append(out, "kms:"+p.KMS.Name)
		case p.Identity != nil:
			out = append(out, "identity")
		default:
			out = append(out, "other")
		}
	}
	return out
}

// TestSecretEncryptionMoveToKMS moves a running secretbox cluster to the KMS plugin as the BPA
// does (Ensure with the KMS, the phase's configuration rolled out, AdvanceSecretEncryption):
// the plugin is the new key of a rotation's three phases, so every API server can read what any
// other wrote at every step; the Secrets are stored again through the plugin once; the
// secretbox key goes only at the end; a rotation under way finishes first; a move is never
// undone silently.
func TestSecretEncryptionMoveToKMS(t *testing.T) {
	ctx := context.Background()
	spy := newSpy()
	spec := testSpec()
	ensure(t, spy, spec, t0)
	r := &reencryptSpy{}
	if _, _, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, r.reencrypt); err != nil { // the first run's sweep
		t.Fatal(err)
	}
	kms := spec
	kms.SecretEncryptionKMS = true
	plugin := "kms:" + pki.KMSProviderName
	for i, want := range []struct {
		st        pki.SecretEncryption
		providers []string
		reenc     int
	}{
		{pki.SecretEncryption{MovingToKMS: true, Phase: pki.RotationAddNew, Key: "bpa-1", Reencrypted: "bpa-1"}, []string{"secretbox:bpa-1", plugin, "identity"}, 1},
		{pki.SecretEncryption{MovingToKMS: true, Phase: pki.RotationUseNew, Key: pki.KMSProviderName, Reencrypted: "bpa-1"}, []string{plugin, "secretbox:bpa-1", "identity"}, 2},
		{pki.SecretEncryption{MovingToKMS: true, Phase: pki.RotationDropOld, Key: pki.KMSProviderName, Reencrypted: pki.KMSProviderName}, []string{plugin, "identity"}, 2},
		{pki.SecretEncryption{KMS: true, Key: pki.KMSProviderName, Reencrypted: pki.KMSProviderName}, []string{plugin, "identity"}, 2},
	} {
		b := ensure(t, spy, kms, t0)
		if got := b.SecretEncryption(); got != want.st {
			t.Fatalf("step %d: %+v, want %+v", i, got, want.st)
		}
		if got := providers(t, b); !slices.Equal(got, want.providers) {
			t.Errorf("step %d (%s): providers %v, want %v", i, want.st.Phase, got, want.providers)
		}
		if i == 1 { // a failed sweep holds the move in UseNew
			r.fail = errors.New("etcd unavailable")
			if st, _, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, r.reencrypt); err == nil || st.Phase != pki.RotationUseNew {
				t.Fatalf("advance with the sweep failing: %+v, %v", st, err)
			}
			r.fail = nil
			r.calls--
		}
		if _, _, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, r.reencrypt); err != nil {
			t.Fatal(err)
		}
		if r.calls != want.reenc {
			t.Errorf("step %d: %d sweeps, want %d", i, r.calls, want.reenc)
		}
		if i == 0 {
			noKMS := spec
			before, _ := spy.Get(ctx, secretName)
			if _, err := pki.Ensure(ctx, spy, secretName, noKMS, clock(t0)); err == nil || !strings.Contains(err.Error(), "give it --cluster-kms-vault-addr") {
				t.Errorf("the KMS taken away during the move: %v", err)
			}
			if after, _ := spy.Get(ctx, secretName); !maps.EqualFunc(before, after, bytes.Equal) {
				t.Error("the refused Ensure changed the stored PKI")
			}
		}
	}
	stored, err := spy.Get(ctx, secretName)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"secretbox.key", "secretbox.sha256", "secretbox.next.key", "encryption.move-to-kms"} {
		if _, ok := stored[k]; ok {
			t.Errorf("%s still stored after the move", k)
		}
	}

	t.Run("a rotation under way finishes first, and its count stays allowed", func(t *testing.T) {
		spy := newSpy()
		ensure(t, spy, spec, t0)
		rotate := spec
		rotate.SecretEncryptionKeyRotations = 1
		ensure(t, spy, rotate, t0) // the rotation starts: AddNew
		rotate.SecretEncryptionKMS = true
		var seen []string
		for range 6 {
			st := ensure(t, spy, rotate, t0).SecretEncryption()
			seen = append(seen, fmt.Sprintf("%s%s %s", map[bool]string{true: "move "}[st.MovingToKMS], st.Phase, st.Key))
			if st.KMS {
				break
			}
			if _, _, err := pki.AdvanceSecretEncryption(ctx, spy, secretName, (&reencryptSpy{}).reencrypt); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"AddNew bpa-1", "UseNew bpa-2", "DropOld bpa-2", "move AddNew bpa-2", "move UseNew edgefleet-vault", "move DropOld edgefleet-vault"}
		if !slices.Equal(seen, want) {
			t.Errorf("phases %q, want %q", seen, want)
		}
		if st := ensure(t, spy, rotate, t0).SecretEncryption(); !st.KMS || st.Generation != 1 {
			t.Errorf("after the move: %+v, want KMS with the secretbox key's generation 1", st)
		}
		rotate.SecretEncryptionKeyRotations = 2
		if _, err := pki.Ensure(ctx, spy, secretName, rotate, clock(t0)); err == nil || !strings.Contains(err.Error(), "ask for 1 rotations") {
			t.Errorf("a rotation asked after the move: %v", err)
		}
	})
}
