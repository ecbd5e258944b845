package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/edgefleet/edgefleet/pkg/packages"
)

// BuiltPackage is a package archive built for a test.
type BuiltPackage struct {
	// Path of the archive, in the test's temporary directory.
	Path string
	// Digest is the archive's sha256, lower-case hex.
	Digest   string
	Manifest *packages.Manifest
}

// Open opens the archive.
func (p BuiltPackage) Open() (io.ReadCloser, error) { return os.Open(p.Path) }

// BuildPackage builds the test-bed package name at version from its recipe in hack/packages/<name>
// and the binaries of bin/ its recipe lists. edit, when not nil, may change the recipe's copy
// before it is built (a test's broken variant, say).
func BuildPackage(t testing.TB, name, version string, edit func(dir string)) BuiltPackage {
	t.Helper()
	var editErr func(string) error
	if edit != nil {
		editErr = func(dir string) error { edit(dir); return nil }
	}
	p, err := BuildPackageIn(t.TempDir(), name, version, editErr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// BuildPackageIn is BuildPackage for programs that are not tests (the demo): the recipe's copy
// and the archive go to dir.
func BuildPackageIn(dir, name, version string, edit func(dir string) error) (BuiltPackage, error) {
	root, err := RepoRoot()
	if err != nil {
		return BuiltPackage{}, err
	}
	recipe := filepath.Join(root, "hack", "packages", name)
	src := filepath.Join(dir, name+"-"+version)
	if err := os.CopyFS(src, os.DirFS(recipe)); err != nil {
		return BuiltPackage{}, fmt.Errorf("copy recipe %s: %w", recipe, err)
	}
	raw, err := os.ReadFile(filepath.Join(src, "binaries"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // a package of scripts and units lists none
		return BuiltPackage{}, fmt.Errorf("package %s: %w", name, err)
	}
	if err := os.MkdirAll(filepath.Join(src, packages.FilesDir, "bin"), 0o755); err != nil {
		return BuiltPackage{}, err
	}
	for _, b := range strings.Fields(string(raw)) {
		data, err := os.ReadFile(filepath.Join(root, "bin", b))
		if err != nil {
			return BuiltPackage{}, fmt.Errorf("package %s: %w (run 'make tools build' first)", name, err)
		}
		if err := os.WriteFile(filepath.Join(src, packages.FilesDir, "bin", b), data, 0o755); err != nil {
			return BuiltPackage{}, err
		}
	}
	if edit != nil {
		if err := edit(src); err != nil {
			return BuiltPackage{}, fmt.Errorf("package %s: edit: %w", name, err)
		}
	}
	var m packages.Manifest
	raw, err = os.ReadFile(filepath.Join(src, packages.ManifestFile))
	if err != nil {
		return BuiltPackage{}, err
	}
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		return BuiltPackage{}, fmt.Errorf("package %s: %s: %w", name, packages.ManifestFile, err)
	}
	m.Version = version
	out := filepath.Join(dir, name+"-"+version+".tar.gz")
	f, err := os.Create(out)
	if err != nil {
		return BuiltPackage{}, err
	}
	defer f.Close()
	sum := sha256.New()
	built, err := packages.Build(io.MultiWriter(f, sum), m, src)
	if err != nil {
		return BuiltPackage{}, fmt.Errorf("package %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return BuiltPackage{}, err
	}
	return BuiltPackage{Path: out, Digest: hex.EncodeToString(sum.Sum(nil)), Manifest: built}, nil
}
