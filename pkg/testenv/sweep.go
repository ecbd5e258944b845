package testenv

import (
	"fmt"
	"maps"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgefleet/edgefleet/pkg/encryption"
)

// startEncrypted starts a control plane whose API server encrypts Secrets with a secretbox key
// of its own (in its configuration file, outside etcd).
func startEncrypted(opts Options) (*ControlPlane, error) {
	box, err := encryption.SecretboxProvider("key-1")
	if err != nil {
		return nil, fmt.Errorf("testenv %s: %w", opts.Name, err)
	}
	opts.Encryption = append(opts.Encryption, box)
	return Start(opts)
}

// record remembers a secret the Fleet made for edgefleet to handle.
func (f *Fleet) record(what string, secret []byte) {
	f.madeMu.Lock()
	defer f.madeMu.Unlock()
	f.made[what] = secret
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
	dirs := []string{f.Dir, f.Global.dir}
	for _, cp := range f.Sites {
		dirs = append(dirs, cp.dir)
	}
	for _, cp := range f.Applications {
		dirs = append(dirs, cp.dir)
	}
	return dirs
}
