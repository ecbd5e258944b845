package builders

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/edgefleet/edgefleet/pkg/packages"
	"github.com/edgefleet/edgefleet/test/testutil"
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

// BuildPackage builds the test-bed package name at version from its recipe in hack/packages/<name>:
// the recipe's own files, the binaries of bin/ its "binaries" file lists (into files/bin/; a
// line holding {version} names the build of the package's upstream version, see versionVar) and
// the files of Debian packages of bin/node-debs its "debs" file lists. edit, when not nil, may change the recipe's copy
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
	root, err := testutil.RepoRoot()
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
		data, err := readBinary(filepath.Join(root, "bin"), b, version)
		if err != nil {
			return BuiltPackage{}, fmt.Errorf("package %s %s: %w", name, version, err)
		}
		if err := os.WriteFile(filepath.Join(src, packages.FilesDir, "bin", path.Base(b)), data, 0o755); err != nil {
			return BuiltPackage{}, err
		}
	}
	if err := copyFromDebs(src, filepath.Join(root, "bin", "node-debs")); err != nil {
		return BuiltPackage{}, fmt.Errorf("package %s: %w", name, err)
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

// versionVar, in a line of a recipe's "binaries" file, stands for the package's upstream version:
// its version up to the first '-', which starts a packaging suffix (kubelet 1.36.3-edgefleet.1 is
// a new package of kubelet 1.36.3's binary).
const versionVar = "{version}"

// readBinary reads the binary that line of a recipe's "binaries" file names, a path under binDir
// that may hold versionVar once, for a package of version.
func readBinary(binDir, line, version string) ([]byte, error) {
	before, after, versioned := strings.Cut(line, versionVar)
	if !versioned {
		data, err := os.ReadFile(filepath.Join(binDir, filepath.FromSlash(line)))
		if err != nil {
			return nil, fmt.Errorf("%w (run 'make tools build' first)", err)
		}
		return data, nil
	}
	upstream, _, _ := strings.Cut(version, "-")
	rel := before + upstream + after
	data, err := os.ReadFile(filepath.Join(binDir, filepath.FromSlash(rel)))
	if !errors.Is(err, fs.ErrNotExist) {
		return data, err
	}
	built, err := builtVersions(binDir, before, after)
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s %s is not built (no bin/%s; built: %s): 'hack/tools.sh %s' builds the versions pinned in hack/tools/*/go.mod",
		path.Base(line), upstream, rel, strings.Join(built, ", "), path.Base(line))
}

// builtVersions lists the versions whose binary is in binDir at before+VERSION+after, or "none".
func builtVersions(binDir, before, after string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(binDir, filepath.FromSlash(before+"*"+after)))
	if err != nil {
		return nil, err
	}
	if len(matches) == 0 {
		return []string{"none"}, nil
	}
	var versions []string
	prefix, suffix := binDir+string(filepath.Separator)+filepath.FromSlash(before), filepath.FromSlash(after)
	for _, m := range matches {
		versions = append(versions, strings.TrimSuffix(strings.TrimPrefix(m, prefix), suffix))
	}
	return versions, nil
}

// copyFromDebs copies the files the recipe in dir lists in its "debs" file out of the Debian
// packages in debDir (hack/tools.sh node-debs) into dir: one "PACKAGE PATH DEST" line per file,
// PATH the file's path in the package, DEST its path in the recipe (under files/); '#' starts a
// comment. A file's mode is kept. Nothing to do without a "debs" file.
func copyFromDebs(dir, debDir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "debs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	want := map[string]map[string]string{} // package -> path in it -> destination
	var order []string
	for n, line := range strings.Split(string(raw), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 || !strings.HasPrefix(f[2], packages.FilesDir+"/") {
			return fmt.Errorf("debs line %d: %q: want PACKAGE PATH files/DEST", n+1, line)
		}
		if want[f[0]] == nil {
			want[f[0]] = map[string]string{}
			order = append(order, f[0])
		}
		want[f[0]][strings.TrimPrefix(f[1], "/")] = f[2]
	}
	for _, pkg := range order {
		debs, err := filepath.Glob(filepath.Join(debDir, pkg+"_*.deb"))
		if err != nil {
			return fmt.Errorf("debs: %w", err)
		}
		if len(debs) != 1 {
			return fmt.Errorf("debs: %d .deb files of %s in %s: run hack/tools.sh node-debs", len(debs), pkg, debDir)
		}
		if err := extractDeb(debs[0], dir, want[pkg]); err != nil {
			return err
		}
	}
	return nil
}

// extractDeb copies the files of the Debian package deb named in files (path in the package ->
// destination under dir) into dir, with their modes.
func extractDeb(deb, dir string, files map[string]string) error {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(deb), err)
	}
	// The whole archive is read: dpkg-deb's decompressor would otherwise block on the pipe.
	if err := extractTar(tar.NewReader(out), dir, files); err != nil {
		_ = cmd.Process.Kill()
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		return fmt.Errorf("%s: %w", filepath.Base(deb), err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w (%s)", filepath.Base(deb), err, stderr.String())
	}
	if len(files) > 0 {
		var missing []string
		for f := range files {
			missing = append(missing, f)
		}
		return fmt.Errorf("%s has no %s", filepath.Base(deb), strings.Join(missing, ", "))
	}
	return nil
}

// extractTar reads tr to its end, writing the files named in files (path -> destination under
// dir) and removing them from files.
func extractTar(tr *tar.Reader, dir string, files map[string]string) error {
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		dest, ok := files[name]
		if !ok {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			return fmt.Errorf("%s is not a regular file", hdr.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(dest))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, os.FileMode(hdr.Mode)&0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		delete(files, name)
	}
}

// StandInPackage is a valid binary package (docs/packages.md) of name, version and
// architecture whose one file, files/payload, holds size random bytes of seed: for beds that
// move packages around (the artifact store, site caches, Releases, campaigns) and never install
// them, since the artifact store refuses as a binary-package what is not one. The same arguments
// give the same bytes; it returns them and their sha256.
func StandInPackage(name, version, arch string, size int, seed uint64) ([]byte, string, error) {
	src, err := os.MkdirTemp("", "edgefleet-standin-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(src)
	if err := os.Mkdir(filepath.Join(src, packages.FilesDir), 0o755); err != nil {
		return nil, "", err
	}
	payload, _ := testutil.RandomContent(size, seed)
	if err := os.WriteFile(filepath.Join(src, packages.FilesDir, "payload"), payload, 0o644); err != nil {
		return nil, "", err
	}
	var out bytes.Buffer
	if _, err := packages.Build(&out, packages.Manifest{Name: name, Version: version, Architecture: arch,
		Description: "a stand-in of " + name + " for test beds: a payload of random bytes"}, src); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(out.Bytes())
	return out.Bytes(), hex.EncodeToString(sum[:]), nil
}
