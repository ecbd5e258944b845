package testfleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
	"github.com/edgefleet/edgefleet/pkg/encryption"
	"github.com/edgefleet/edgefleet/test/controlplane"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// startEncrypted starts a control plane whose API server encrypts Secrets with a secretbox key
// of its own (in its configuration file, outside etcd).
func startEncrypted(opts controlplane.Options) (*controlplane.ControlPlane, error) {
	box, err := encryption.SecretboxProvider("key-1")
	if err != nil {
		return nil, fmt.Errorf("testenv %s: %w", opts.Name, err)
	}
	opts.Encryption = append(opts.Encryption, box)
	return controlplane.Start(opts)
}

// record remembers a secret the Fleet made for edgefleet to handle.
func (f *Fleet) record(what string, secret []byte) {
	f.madeMu.Lock()
	defer f.madeMu.Unlock()
	f.made[what] = secret
}

// NewBMCPassword makes a BMC password at random and records it for the sweep.
func (f *Fleet) NewBMCPassword(host string) (string, error) {
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return "", err
	}
	s := hex.EncodeToString(pw)
	f.record("the BMC password of host "+host, []byte(s))
	return s, nil
}

// recordKubeconfig records the credentials of a kubeconfig's users: client keys and tokens.
func (f *Fleet) recordKubeconfig(what string, kubeconfig []byte) error {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for name, u := range cfg.AuthInfos {
		if len(u.ClientKeyData) > 0 {
			f.record(what+" (client key of "+name+")", u.ClientKeyData)
		}
		if u.Token != "" {
			f.record(what+" (token of "+name+")", []byte(u.Token))
		}
	}
	return nil
}

// SweepSecrets returns the secrets the Fleet made for edgefleet to handle, by what they are: the
// BMC passwords and the global controller's site credentials of Apply, the enrollment tokens of
// Enroll. None of them may be found in clear anywhere the Fleet writes (SweepDirs).
func (f *Fleet) SweepSecrets() map[string][]byte {
	f.madeMu.Lock()
	defer f.madeMu.Unlock()
	return maps.Clone(f.made)
}

// SweepDirs are the directories the Fleet writes: its own (kubeconfigs, the controllers' and
// components' logs, the global controller's artifact database) and every control plane's
// (etcd's data, write-ahead log included).
func (f *Fleet) SweepDirs() []string {
	dirs := []string{f.Dir, f.Global.Dir()}
	for _, cp := range f.Sites {
		dirs = append(dirs, cp.Dir())
	}
	return dirs
}

// Sweep is what Fleet.Sweep searched and found.
type Sweep struct {
	// Secrets is how many secrets were looked for, Files how many files were read.
	Secrets, Files int
	// Found names each secret found in clear and where.
	Found []string
}

// Sweep searches every directory the Fleet writes (SweepDirs) for the secrets it made for
// edgefleet to handle (SweepSecrets) and those edgefleet wrote on the sites: each site's
// artifact token and the client keys of the application clusters' admin kubeconfigs. It fails
// when it looks for nothing, or when a control is not found: a key etcd keeps in clear, and a
// value it plants in clear on the global cluster (as a Secret would be with encryption off).
func (f *Fleet) Sweep(ctx context.Context) (Sweep, error) {
	secrets := f.SweepSecrets()
	for name, site := range f.Sites {
		list := &corev1.SecretList{}
		if err := site.Client.List(ctx, list); err != nil {
			return Sweep{}, fmt.Errorf("sweep: Secrets of %s: %w", name, err)
		}
		for _, s := range list.Items {
			switch {
			case s.Name == sitev1.GlobalAPISecretName:
				secrets["the artifact token of site "+name] = s.Data[sitev1.GlobalAPITokenKey]
			case s.Type == clusterv1.ClusterSecretType && strings.HasSuffix(s.Name, "-kubeconfig"):
				cfg, err := clientcmd.Load(s.Data["value"])
				if err != nil {
					return Sweep{}, fmt.Errorf("sweep: %s/%s of %s: %w", s.Namespace, s.Name, name, err)
				}
				for user, u := range cfg.AuthInfos {
					secrets[fmt.Sprintf("the client key of %s in %s's %s", user, name, s.Name)] = u.ClientKeyData
				}
			}
		}
	}
	maps.DeleteFunc(secrets, func(_ string, s []byte) bool { return len(s) == 0 })
	if len(secrets) == 0 {
		return Sweep{}, errors.New("sweep: no secret to look for")
	}
	found, scanned, err := testutil.FindSecrets(f.SweepDirs(), secrets)
	if err != nil {
		return Sweep{}, err
	}
	// The controls: a value stored with no encryption (a ConfigMap's, as a Secret's would be
	// with encryption off) and a key of etcd are found in clear, or the sweep read the wrong
	// files, or read them in a way that would miss a secret.
	planted, err := f.plantClearValue(ctx)
	if err != nil {
		return Sweep{}, err
	}
	for what, control := range map[string][]byte{
		"the key of namespace edgefleet-system": []byte("/registry/namespaces/edgefleet-system"),
		"a value planted in clear":              planted,
	} {
		seen, _, err := testutil.FindSecrets(f.SweepDirs(), map[string][]byte{what: control})
		if err != nil {
			return Sweep{}, err
		}
		if len(seen) == 0 {
			return Sweep{}, fmt.Errorf("sweep: %s was not found: it looked in the wrong place", what)
		}
	}
	return Sweep{Secrets: len(secrets), Files: scanned, Found: found}, nil
}

// plantClearValue stores a random value in a ConfigMap of the global cluster, which its API
// server does not encrypt, for the sweep's control.
func (f *Fleet) plantClearValue(ctx context.Context) ([]byte, error) {
	value := []byte("sweep-control-" + rand.Text())
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "sweep-control-"},
		Data:       map[string]string{"value": string(value)},
	}
	if err := f.Global.Client.Create(ctx, cm); err != nil {
		return nil, fmt.Errorf("sweep: plant the control value: %w", err)
	}
	return value, nil
}
