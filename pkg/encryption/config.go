package encryption

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"
)

// Resource is what the configurations encrypt.
const Resource = "secrets"

// KMSProvider is the provider of the KMS v2 plugin named name (it names the provider in the
// stored data's prefix, "k8s:enc:kms:v2:<name>:") listening on the Unix socket socketPath, each
// of the API server's calls to it bounded by timeout.
func KMSProvider(name, socketPath string, timeout time.Duration) apiserverv1.ProviderConfiguration {
	return apiserverv1.ProviderConfiguration{KMS: &apiserverv1.KMSConfiguration{
		APIVersion: "v2",
		Name:       name,
		Endpoint:   "unix://" + socketPath,
		Timeout:    &metav1.Duration{Duration: timeout},
	}}
}

// SecretboxProvider returns a secretbox provider (XSalsa20-Poly1305) with a new random 32-byte
// key named keyName: the fallback where no Vault is configured. The key exists in the returned
// value only; WriteConfig puts it into the API server's configuration file, which is its only
// copy at rest (never etcd, never the repository).
func SecretboxProvider(keyName string) (apiserverv1.ProviderConfiguration, error) {
	key, err := NewSecretboxKey()
	if err != nil {
		return apiserverv1.ProviderConfiguration{}, fmt.Errorf("secretbox key %s: %w", keyName, err)
	}
	return Secretbox(apiserverv1.Key{Name: keyName, Secret: key})
}

// NewSecretboxKey makes a random 32-byte secretbox key, base64-encoded as an
// EncryptionConfiguration holds it.
func NewSecretboxKey() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(key), nil
}

// Secretbox is the secretbox provider of keys (keys kept elsewhere, such as the BPA's secret
// store; each Secret the base64 encoding of 32 bytes): the API server encrypts with the first
// and decrypts with any of them, by the name in the stored value. A key that is not 32 bytes,
// a key without a name and two keys of one name are refused.
func Secretbox(keys ...apiserverv1.Key) (apiserverv1.ProviderConfiguration, error) {
	if len(keys) == 0 {
		return apiserverv1.ProviderConfiguration{}, errors.New("secretbox: no key")
	}
	names := map[string]bool{}
	for _, k := range keys {
		switch raw, err := base64.StdEncoding.DecodeString(k.Secret); {
		case k.Name == "":
			return apiserverv1.ProviderConfiguration{}, errors.New("secretbox: a key has no name")
		case names[k.Name]:
			return apiserverv1.ProviderConfiguration{}, fmt.Errorf("secretbox: two keys named %s", k.Name)
		case err != nil || len(raw) != 32:
			return apiserverv1.ProviderConfiguration{}, fmt.Errorf("secretbox key %s: want 32 bytes in base64", k.Name)
		}
		names[k.Name] = true
	}
	return apiserverv1.ProviderConfiguration{Secretbox: &apiserverv1.SecretboxConfiguration{Keys: slices.Clone(keys)}}, nil
}

// Config is the EncryptionConfiguration encrypting Secrets with the first of providers: the
// API server writes with it and reads with any of them, the identity provider last so Secrets
// stored before encryption was switched on stay readable until Reencrypt rewrites them.
func Config(providers ...apiserverv1.ProviderConfiguration) (*apiserverv1.EncryptionConfiguration, error) {
	if len(providers) == 0 {
		return nil, errors.New("encryption configuration: no provider")
	}
	all := append(append([]apiserverv1.ProviderConfiguration{}, providers...),
		apiserverv1.ProviderConfiguration{Identity: &apiserverv1.IdentityConfiguration{}})
	return &apiserverv1.EncryptionConfiguration{
		TypeMeta:  metav1.TypeMeta{APIVersion: apiserverv1.SchemeGroupVersion.String(), Kind: "EncryptionConfiguration"},
		Resources: []apiserverv1.ResourceConfiguration{{Resources: []string{Resource}, Providers: all}},
	}, nil
}

// Marshal is Config(providers...) as the YAML of kube-apiserver's --encryption-provider-config
// file.
func Marshal(providers ...apiserverv1.ProviderConfiguration) ([]byte, error) {
	cfg, err := Config(providers...)
	if err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encryption configuration: %w", err)
	}
	return data, nil
}

// WriteConfig writes Marshal(providers...) to path for kube-apiserver's
// --encryption-provider-config, readable by its owner only (0600; it may hold a key), replacing
// any file there at once (written beside it, then renamed).
func WriteConfig(path string, providers ...apiserverv1.ProviderConfiguration) error {
	data, err := Marshal(providers...)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".encryption-config-*") // mode 0600
	if err != nil {
		return fmt.Errorf("write encryption configuration %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		return errors.Join(fmt.Errorf("write encryption configuration %s: %w", path, err), os.Remove(tmp.Name()))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return errors.Join(fmt.Errorf("write encryption configuration %s: %w", path, err), os.Remove(tmp.Name()))
	}
	return nil
}
