package pki

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"

	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/pkg/secrets"
)

// The key the API servers encrypt Secrets with in etcd, and its rotation, as stored in the
// PKI's secret. The key of generation g is named "bpa-<g+1>" (etcd's values start
// "k8s:enc:secretbox:v1:bpa-<g+1>:"), so a name never comes back for another key.
const (
	encryptionKey = "secretbox.key"
	// encryptionKeySum records the key's sha256 (hex) once it is made: a key lost or replaced
	// later is refused instead of silently made again.
	encryptionKeySum = "secretbox.sha256"
	// encryptionKeyGeneration is how many rotations the key has had (decimal; none stored: 0).
	encryptionKeyGeneration = "secretbox.generation"
	// nextEncryptionKey and its sum are the new key while a rotation runs.
	nextEncryptionKey    = "secretbox.next.key"
	nextEncryptionKeySum = "secretbox.next.sha256"
	// encryptionRotationPhase is the RotationPhase of the rotation under way.
	encryptionRotationPhase = "secretbox.rotation"
	// encryptionReencrypted is the name of the key every Secret was last stored again under.
	encryptionReencrypted = "secretbox.reencrypted"
	// encryptionProvider is "kms" when the API servers encrypt through the KMS plugin
	// (Spec.SecretEncryptionKMS); absent, with a secretbox key.
	encryptionProvider = "encryption.provider"
	providerKMS        = "kms"
	// encryptionMove is the RotationPhase of a secretbox cluster's move to the KMS plugin: the
	// plugin is the "new key" of a rotation's three phases, and after DropOld the secretbox key
	// is gone and the provider is "kms".
	encryptionMove = "encryption.move-to-kms"
)

// The API servers' KMS v2 provider of a cluster whose Secrets are encrypted through Vault
// (Spec.SecretEncryptionKMS): the kms-plugin package runs edgefleet-kms on each control-plane
// host, listening on KMSSocket (its default).
const (
	// KMSProviderName names the provider, and what the API servers store with it
	// ("k8s:enc:kms:v2:edgefleet-vault:").
	KMSProviderName = "edgefleet-vault"
	// KMSSocket is the plugin's Unix socket.
	KMSSocket = "/run/edgefleet-kms/kms.sock"
	// KMSTimeout bounds each of the API server's calls to the plugin; the plugin's own Vault
	// calls are bounded below it (edgefleet-kms --vault-timeout, 4s).
	KMSTimeout = 10 * time.Second
)

// RotationPhase is where a rotation of the Secret encryption key stands. Each phase's
// configuration reaches every API server (one at a time) before AdvanceSecretEncryption moves
// to the next, so no API server ever meets a Secret written with a key it does not have.
type RotationPhase string

// Rotation phases, in order.
const (
	// RotationAddNew: the API servers decrypt with both keys and still encrypt with the old.
	RotationAddNew RotationPhase = "AddNew"
	// RotationUseNew: they encrypt with the new key and still decrypt with the old; every
	// Secret is then stored again under the new key.
	RotationUseNew RotationPhase = "UseNew"
	// RotationDropOld: they have only the new key.
	RotationDropOld RotationPhase = "DropOld"
)

// SecretEncryption is where a cluster's Secret encryption key stands.
type SecretEncryption struct {
	// Generation is how many rotations the key in use has had.
	Generation int64
	// Key is the name of the key the API servers encrypt with: the new key's from UseNew on.
	Key string
	// Phase of the rotation under way; "" when none is.
	Phase RotationPhase
	// Reencrypted is the name of the key every Secret was last stored again under; "" before
	// the first time.
	Reencrypted string
	// KMS is true when the API servers encrypt through the KMS plugin (Key is then
	// KMSProviderName, and the transit key's rotations are Vault's).
	KMS bool
	// MovingToKMS is true while a secretbox cluster's Secrets move to the KMS plugin: Phase
	// says where (AddNew: the plugin decrypts too, UseNew: it encrypts, the secretbox key still
	// decrypts, DropOld: the plugin alone), and Key is KMSProviderName from UseNew on.
	MovingToKMS bool
}

// keyName is the name of the key of generation g.
func keyName(g int64) string { return "bpa-" + strconv.FormatInt(g+1, 10) }

// secretEncryptionOf reads the key's state from a stored PKI, checking what Ensure stored.
func secretEncryptionOf(data map[string][]byte) (SecretEncryption, error) {
	var st SecretEncryption
	g, err := generationOf(data, encryptionKeyGeneration, "the key's name, and so the Secrets' readability,")
	if err != nil {
		return st, err
	}
	st.Generation, st.Key, st.Reencrypted = g, keyName(g), string(data[encryptionReencrypted])
	if string(data[encryptionProvider]) == providerKMS {
		// Generation stays what the secretbox key had reached, when the cluster moved.
		st.KMS, st.Key = true, KMSProviderName
		return st, nil
	}
	if _, moving := data[encryptionMove]; moving {
		if st.Phase, err = phaseOf(data, encryptionMove); err != nil {
			return st, err
		}
		st.MovingToKMS = true
		if st.Phase.usesNew() {
			st.Key = KMSProviderName
		}
		return st, nil
	}
	if st.Phase, err = phaseOf(data, encryptionRotationPhase); err != nil {
		return st, err
	}
	if st.Phase.usesNew() {
		st.Key = keyName(g + 1)
	}
	return st, nil
}

// secretEncryption keeps the stored key the API servers encrypt Secrets with in etcd, or makes
// one when the store has none and never had one. Secrets written with it are readable only as
// long as it is kept, so it is never replaced: a key gone from the store, or another key in its
// place, while its sha256 is recorded, is an error naming what to restore. When rotations asks
// for more rotations than the key has had and none runs, a rotation starts: a new key is made
// and the phase is AddNew (AdvanceSecretEncryption takes it on from there).
//
// kms asks for the KMS plugin. A new cluster gets it from the start. A secretbox cluster moves to
// it in the rotation's three phases, the plugin standing for the new key, once no rotation of
// its secretbox key runs. A cluster never goes back from the plugin to a secretbox key.
func (e *ensurer) secretEncryption(rotations int64, kms bool) error {
	_, secretbox := e.old[encryptionKeySum]
	_, moving := e.old[encryptionMove]
	_, rotating := e.old[encryptionRotationPhase]
	wasKMS := string(e.old[encryptionProvider]) == providerKMS
	g, err := generationOf(e.old, encryptionKeyGeneration, "the key's name, and so the Secrets' readability,")
	if err != nil {
		return err
	}
	switch {
	case !kms && (wasKMS || moving):
		return errors.New("the cluster's Secrets are encrypted through the KMS plugin (Vault), or moving to it, but the BPA has no KMS configured: give it --cluster-kms-vault-addr (and the other --cluster-kms flags) again; a secretbox key would leave the Secrets unreadable")
	case kms && (wasKMS || !secretbox) && rotations > g:
		return fmt.Errorf("a cluster whose Secrets are encrypted through the KMS plugin rotates its Vault transit key in Vault (vault write -f transit/keys/<key>/rotate), not through secretEncryption.keyRotations: ask for %d rotations (what its secretbox key had), not %d", g, rotations)
	case kms && (wasKMS || !secretbox):
		e.data[encryptionProvider] = []byte(providerKMS)
		for _, k := range []string{encryptionKeyGeneration, encryptionReencrypted} {
			if v, ok := e.old[k]; ok {
				e.data[k] = v
			}
		}
		return nil
	}
	key, err := e.keepKey(encryptionKey, encryptionKeySum, true)
	if err != nil {
		return err
	}
	e.data[encryptionKey], e.data[encryptionKeySum] = key, sum(key)
	for _, k := range []string{encryptionKeyGeneration, encryptionRotationPhase, encryptionReencrypted, encryptionMove} {
		if v, ok := e.old[k]; ok {
			e.data[k] = v
		}
	}
	if kms && !rotating && !moving && rotations <= g {
		e.data[encryptionMove] = []byte(RotationAddNew) // a rotation under way or asked for ends first
	}
	st, err := secretEncryptionOf(e.data)
	if err != nil {
		return err
	}
	if st.MovingToKMS {
		return nil
	}
	if st.Phase == "" && rotations <= st.Generation {
		if _, ok := e.old[nextEncryptionKey]; ok {
			return fmt.Errorf("%s is stored, but no rotation is under way (%s is not set): restore %s, or remove %s if no API server was ever given it", nextEncryptionKey, encryptionRotationPhase, encryptionRotationPhase, nextEncryptionKey)
		}
		return nil
	}
	next, err := e.keepKey(nextEncryptionKey, nextEncryptionKeySum, st.Phase == "")
	if err != nil {
		return err
	}
	if st.Phase == "" {
		e.data[encryptionRotationPhase] = []byte(RotationAddNew)
	}
	e.data[nextEncryptionKey], e.data[nextEncryptionKeySum] = next, sum(next)
	return nil
}

// keepKey returns the stored secretbox key name, checked against its recorded sha256 (under
// sumName); when neither is stored and mayMake, a new key.
func (e *ensurer) keepKey(name, sumName string, mayMake bool) ([]byte, error) {
	key, ok := e.old[name]
	recorded, wasMade := e.old[sumName]
	switch {
	case !ok && wasMade:
		return nil, fmt.Errorf("%s is gone from the secret store, but the cluster's API servers may encrypt Secrets with it (sha256 %s): restore it; a new key would leave Secrets unreadable", name, recorded)
	case !ok && !mayMake:
		return nil, fmt.Errorf("%s is gone from the secret store while a rotation is under way (%s is set): restore it; a new key would leave Secrets unreadable", name, encryptionRotationPhase)
	case !ok:
		k, err := encryption.NewSecretboxKey()
		if err != nil {
			return nil, fmt.Errorf("secret encryption key: %w", err)
		}
		key = []byte(k)
	}
	if _, err := encryption.Secretbox(apiserverv1.Key{Name: name, Secret: string(key)}); err != nil {
		return nil, fmt.Errorf("%w: refusing to replace a key the cluster's Secrets may be encrypted with; restore %s", err, name)
	}
	if wasMade && string(recorded) != string(sum(key)) {
		return nil, fmt.Errorf("%s is not the key the cluster's Secrets are encrypted with (sha256 %s): restore that one", name, recorded)
	}
	return key, nil
}

func sum(key []byte) []byte {
	s := sha256.Sum256(key)
	return []byte(hex.EncodeToString(s[:]))
}

// SecretEncryption is where the bundle's Secret encryption key stands.
func (b *Bundle) SecretEncryption() SecretEncryption {
	st, _ := secretEncryptionOf(b.data) // Ensure checked it
	return st
}

// encryptionConfig is the API servers' EncryptionConfiguration for the bundle's phase: the
// key that encrypts first.
func (b *Bundle) encryptionConfig() ([]byte, error) {
	st := b.SecretEncryption()
	plugin := encryption.KMSProvider(KMSProviderName, KMSSocket, KMSTimeout)
	if st.KMS {
		return encryption.Marshal(plugin)
	}
	current := apiserverv1.Key{Name: keyName(st.Generation), Secret: string(b.get(encryptionKey))}
	if st.MovingToKMS {
		box, err := encryption.Secretbox(current)
		if err != nil {
			return nil, err
		}
		switch st.Phase {
		case RotationAddNew:
			return encryption.Marshal(box, plugin)
		case RotationUseNew:
			return encryption.Marshal(plugin, box)
		}
		return encryption.Marshal(plugin)
	}
	next := apiserverv1.Key{Name: keyName(st.Generation + 1), Secret: string(b.get(nextEncryptionKey))}
	keys := []apiserverv1.Key{current}
	switch st.Phase {
	case RotationAddNew:
		keys = []apiserverv1.Key{current, next}
	case RotationUseNew:
		keys = []apiserverv1.Key{next, current}
	case RotationDropOld:
		keys = []apiserverv1.Key{next}
	}
	box, err := encryption.Secretbox(keys...)
	if err != nil {
		return nil, err
	}
	return encryption.Marshal(box)
}

// AdvanceSecretEncryption moves the Secret encryption key of the PKI stored under name on,
// once every API server of the cluster runs with the configuration of the current phase (the
// caller has rolled it out): when the Secrets were not all stored again under the key the API
// servers now encrypt with, reencrypt does that first (and is recorded, so that it runs once
// per key); then a rotation under way goes to its next phase, and after DropOld ends, the new
// key is the key. Each step is written before it returns, and running it again after a crash
// redoes at most the re-encryption, which rewrites only what is not under the key yet. It
// returns the new state, and how many Secrets reencrypt stored again (nil when it did not run).
func AdvanceSecretEncryption(ctx context.Context, store Store, name string, reencrypt func(context.Context) (encryption.Result, error)) (SecretEncryption, *encryption.Result, error) {
	data, err := store.Get(ctx, name)
	if errors.Is(err, secrets.ErrNotFound) {
		return SecretEncryption{}, nil, fmt.Errorf("pki %s: %w", name, ErrNoPKI)
	}
	if err != nil {
		return SecretEncryption{}, nil, fmt.Errorf("pki %s: load from the secret store: %w", name, err)
	}
	st, err := secretEncryptionOf(data)
	if err != nil {
		return st, nil, fmt.Errorf("pki %s: %w", name, err)
	}
	old := maps.Clone(data)
	var res *encryption.Result
	if st.Reencrypted != st.Key {
		r, err := reencrypt(ctx)
		if err != nil {
			return st, &r, fmt.Errorf("store every Secret again under key %s: %w", st.Key, err)
		}
		res, st.Reencrypted = &r, st.Key
		data[encryptionReencrypted] = []byte(st.Key)
	}
	switch {
	case st.MovingToKMS:
		st = nextMovePhase(st, data)
	case !st.KMS: // a KMS provider has no rotation here (Vault rotates the transit key)
		st = nextPhase(st, data)
	}
	if !maps.EqualFunc(old, data, func(a, b []byte) bool { return string(a) == string(b) }) {
		if err := store.Put(ctx, name, data); err != nil {
			return st, res, fmt.Errorf("pki %s: save to the secret store: %w", name, err)
		}
	}
	return st, res, nil
}

// nextMovePhase takes a move to the KMS plugin to its next phase in data; after DropOld the
// secretbox key is forgotten (no API server has it any more, and no Secret is under it) and the
// provider is the plugin. It returns the new state.
func nextMovePhase(st SecretEncryption, data map[string][]byte) SecretEncryption {
	if st.Phase = st.Phase.Next(); st.Phase != "" {
		data[encryptionMove] = []byte(st.Phase)
		st.Key = KMSProviderName
		return st
	}
	for _, k := range []string{encryptionMove, encryptionKey, encryptionKeySum} {
		delete(data, k)
	}
	data[encryptionProvider] = []byte(providerKMS)
	st.MovingToKMS, st.KMS, st.Key = false, true, KMSProviderName
	return st
}

// nextPhase takes a secretbox key's rotation under way to its next phase in data, and after
// DropOld makes the new key the key; it returns the new state.
func nextPhase(st SecretEncryption, data map[string][]byte) SecretEncryption {
	if st.Phase == RotationDropOld {
		st.Generation++
		data[encryptionKey], data[encryptionKeySum] = data[nextEncryptionKey], data[nextEncryptionKeySum]
		data[encryptionKeyGeneration] = []byte(strconv.FormatInt(st.Generation, 10))
		delete(data, nextEncryptionKey)
		delete(data, nextEncryptionKeySum)
	}
	if st.Phase = st.Phase.Next(); st.Phase == "" {
		delete(data, encryptionRotationPhase)
	} else {
		data[encryptionRotationPhase] = []byte(st.Phase)
	}
	st.Key = keyName(st.Generation)
	if st.Phase.usesNew() {
		st.Key = keyName(st.Generation + 1)
	}
	return st
}
