package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// Modules whose CRDs a control plane can install. The CRDs are read from the module cache at
// the version go.mod selects, so they always match the operator binary and the Go types the
// tests use; they are not copied into the repository.
const (
	// Metal3Module is Metal3's baremetal-operator (BareMetalHost and friends).
	Metal3Module = "github.com/metal3-io/baremetal-operator"
	// ClusterAPIModule is Cluster-API (Cluster, Machine, MachineDeployment, ...).
	ClusterAPIModule = "sigs.k8s.io/cluster-api"
	// IstioAPIModule is Istio's API (PeerAuthentication, AuthorizationPolicy, ...).
	IstioAPIModule = "istio.io/api"
)

// Where the CRDs sit inside their modules.
const (
	metal3CRDPath     = "config/base/crds/bases"
	clusterAPICRDPath = "core/config/crd/bases"
	// istioCRDPath is one file with every Istio CRD.
	istioCRDPath = "kubernetes/customresourcedefinitions.gen.yaml"
)

// Metal3CRDDir returns the directory of the baremetal-operator's CRDs in the module cache.
func Metal3CRDDir(ctx context.Context) (string, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := ModuleSubdir(ctx, root, Metal3Module, metal3CRDPath)
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

// ClusterAPICRDDir returns the directory of Cluster-API's core CRDs in the module cache.
func ClusterAPICRDDir(ctx context.Context) (string, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := ModuleSubdir(ctx, root, ClusterAPIModule, clusterAPICRDPath)
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

// ModuleDir returns the directory of module in the module cache at the version the
// repository's go.mod selects, downloading the module first when it is not cached yet.
func ModuleDir(ctx context.Context, module string) (string, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := moduleDir(ctx, root, module)
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

func moduleDir(ctx context.Context, root, module string) (string, error) {
	dir, err := goCmd(ctx, root, "list", "-m", "-f", "{{.Dir}}", module)
	if err != nil {
		return "", err
	}
	if dir == "" {
		if _, err := goCmd(ctx, root, "mod", "download", module); err != nil {
			return "", err
		}
		if dir, err = goCmd(ctx, root, "list", "-m", "-f", "{{.Dir}}", module); err != nil {
			return "", err
		}
	}
	if dir == "" {
		return "", fmt.Errorf("module %s has no directory in the module cache after go mod download", module)
	}
	return dir, nil
}

// ModuleSubdir returns the directory sub (slash-separated) inside module, whose version is the
// one the go.mod of the repository at root selects.
func ModuleSubdir(ctx context.Context, root, module, sub string) (string, error) {
	dir, err := moduleDir(ctx, root, module)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.FromSlash(sub))
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("module %s: %w", module, err)
	}
	return path, nil
}

// goCmd runs the go command in dir and returns its trimmed standard output.
func goCmd(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// crdDirs lists the CRD directories (and files) opts asks for.
func (opts Options) crdDirs(ctx context.Context, root string) ([]string, error) {
	var dirs []string
	if opts.InstallCRDs {
		dirs = append(dirs, filepath.Join(root, "deploy", "crds", "global"))
	}
	if opts.InstallSiteCRDs {
		dirs = append(dirs, filepath.Join(root, "deploy", "crds", "site"))
	}
	if opts.Metal3CRDs {
		dir, err := ModuleSubdir(ctx, root, Metal3Module, metal3CRDPath)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}
	if opts.ClusterAPICRDs {
		dir, err := ModuleSubdir(ctx, root, ClusterAPIModule, clusterAPICRDPath)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}
	if opts.IstioCRDs {
		file, err := ModuleSubdir(ctx, root, IstioAPIModule, istioCRDPath)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, file)
	}
	return dirs, nil
}

// InstallCRDs installs (or updates) the CRDs of the YAML files in dirs and waits until the API
// server serves them, for control planes that are already running.
func (cp *ControlPlane) InstallCRDs(dirs ...string) error {
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: dirs, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("testenv %s: install CRDs from %s: %w", cp.Name, strings.Join(dirs, ", "), err)
	}
	return nil
}
