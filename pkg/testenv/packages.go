package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
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
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join(root, "hack", "packages", name)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(recipe)); err != nil {
		t.Fatalf("copy recipe %s: %v", recipe, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "binaries"))
	if err != nil {
		t.Fatalf("package %s: %v", name, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, packages.FilesDir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range strings.Fields(string(raw)) {
		src := filepath.Join(root, "bin", b)
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("package %s: %v (run 'make tools build' first)", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, packages.FilesDir, "bin", b), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(dir)
	}
	var m packages.Manifest
	raw, err = os.ReadFile(filepath.Join(dir, packages.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("package %s: %s: %v", name, packages.ManifestFile, err)
	}
	m.Version = version
	out := filepath.Join(t.TempDir(), name+"-"+version+".tar.gz")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum := sha256.New()
	built, err := packages.Build(io.MultiWriter(f, sum), m, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return BuiltPackage{Path: out, Digest: hex.EncodeToString(sum.Sum(nil)), Manifest: built}
}
