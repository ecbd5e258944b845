package builders_test

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgefleet/edgefleet/test/builders"
)

// TestBuildPackageKubernetesVersions builds each Kubernetes recipe at each version hack/tools.sh
// builds, and runs the packaged binary: it is the version's. A packaging suffix (from a '-')
// packages the same binary; a version that is not built is refused, naming it and the command
// that builds it.
func TestBuildPackageKubernetesVersions(t *testing.T) {
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		for _, tt := range []struct{ version, want string }{
			{"1.35.8", "Kubernetes v1.35.8"},
			{"1.36.3-edgefleet.1", "Kubernetes v1.36.3"},
		} {
			t.Run(name+"-"+tt.version, func(t *testing.T) {
				p := builders.BuildPackage(t, name, tt.version, nil)
				if p.Manifest.Version != tt.version {
					t.Errorf("manifest version %q, want %q", p.Manifest.Version, tt.version)
				}
				if got := packagedVersion(t, p, name); got != tt.want {
					t.Errorf("files/bin/%s --version: %q, want %q", name, got, tt.want)
				}
			})
		}
	}
	t.Run("version not built", func(t *testing.T) {
		_, err := builders.BuildPackageIn(t.TempDir(), "kubelet", "1.34.0", nil)
		if err == nil {
			t.Fatal("kubelet 1.34.0 built, want an error: no such kubelet is built")
		}
		for _, want := range []string{"package kubelet 1.34.0: kubelet 1.34.0 is not built (no bin/kube/v1.34.0/kubelet; built: ", "1.35.8", "1.36.3", "'hack/tools.sh kubelet' builds"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	})
}

// packagedVersion runs files/bin/NAME --version out of the package p.
func packagedVersion(t *testing.T, p builders.BuiltPackage, name string) string {
	t.Helper()
	f, err := p.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	bin := filepath.Join(t.TempDir(), name)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no files/bin/%s", p.Path, name)
		} else if err != nil {
			t.Fatal(err)
		}
		if hdr.Name != "files/bin/"+name {
			continue
		}
		out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		break
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", name, err, out)
	}
	return strings.TrimSpace(string(out))
}
