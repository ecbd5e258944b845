package packages

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// maxManifest bounds the manifest an archive may hold.
const maxManifest = 1 << 20

// Build writes the package archive of m to w, from srcDir holding files/, units/ and hooks/ (the
// latter two as m names them). It fills in m.APIVersion and m.Files from files/ (every regular
// file, with its permission bits, sha256 and size) and returns the manifest it wrote. The same
// inputs give the same bytes.
func Build(w io.Writer, m Manifest, srcDir string) (*Manifest, error) {
	m.APIVersion = APIVersion
	files, err := scanFiles(filepath.Join(srcDir, FilesDir))
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", m.Name, err)
	}
	m.Files = files
	if err := m.Validate(); err != nil {
		return nil, err
	}
	manifest, err := yaml.Marshal(&m)
	if err != nil {
		return nil, fmt.Errorf("package %s: encode manifest: %w", m.Name, err)
	}

	type entry struct {
		name, src string
		mode      int64
	}
	var entries []entry
	for _, f := range m.Files {
		perm, _ := f.Perm() // validated
		entries = append(entries, entry{FilesDir + "/" + f.Path, filepath.Join(srcDir, FilesDir, filepath.FromSlash(f.Path)), int64(perm)})
	}
	for _, u := range m.Units {
		entries = append(entries, entry{UnitsDir + "/" + u, filepath.Join(srcDir, UnitsDir, u), 0o644})
	}
	for _, h := range m.hooks() {
		src := filepath.Join(srcDir, HooksDir, h)
		if slices.ContainsFunc(entries, func(e entry) bool { return e.src == src }) {
			continue // one script may serve as two hooks
		}
		entries = append(entries, entry{HooksDir + "/" + h, src, 0o755})
	}

	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", m.Name, err)
	}
	tw := tar.NewWriter(gz)
	if err := writeEntry(tw, ManifestFile, 0o644, bytes.NewReader(manifest), int64(len(manifest))); err != nil {
		return nil, fmt.Errorf("package %s: %w", m.Name, err)
	}
	for _, e := range entries {
		if err := copyEntry(tw, e.name, e.src, e.mode); err != nil {
			return nil, fmt.Errorf("package %s: %w", m.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("package %s: finish archive: %w", m.Name, err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("package %s: finish compression: %w", m.Name, err)
	}
	return &m, nil
}

// scanFiles lists the regular files under dir, sorted by path; an absent dir has none.
func scanFiles(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return fs.SkipDir
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s/%s: only regular files can be packaged (found %s)", FilesDir, filepath.ToSlash(rel), d.Type())
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Mode: fmt.Sprintf("%04o", info.Mode().Perm()), SHA256: sum, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyEntry(tw *tar.Writer, name, src string, mode int64) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", name)
	}
	return writeEntry(tw, name, mode, f, info.Size())
}

func writeEntry(tw *tar.Writer, name string, mode int64, r io.Reader, size int64) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if n, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	} else if n != size {
		return fmt.Errorf("%s: changed while being packaged", name)
	}
	return nil
}

// Read reads a whole package archive from r and checks it against its manifest: the manifest
// comes first and is valid; every listed file is there once, with its mode, size and sha256;
// every unit and hook is there, hooks executable; nothing else is (directories aside). It
// returns the manifest.
func Read(r io.Reader) (*Manifest, error) {
	tr, m, err := readManifest(r)
	if err != nil {
		return nil, err
	}

	want := map[string]func(*tar.Header) error{}
	for _, f := range m.Files {
		want[FilesDir+"/"+f.Path] = func(h *tar.Header) error {
			perm, _ := f.Perm()
			if h.Mode&0o7777 != int64(perm) {
				return fmt.Errorf("mode %04o, manifest says %s", h.Mode&0o7777, f.Mode)
			}
			if h.Size != f.Size {
				return fmt.Errorf("%d bytes, manifest says %d", h.Size, f.Size)
			}
			s := sha256.New()
			if _, err := io.Copy(s, tr); err != nil {
				return err
			}
			if got := hex.EncodeToString(s.Sum(nil)); got != f.SHA256 {
				return fmt.Errorf("sha256 %s, manifest says %s", got, f.SHA256)
			}
			return nil
		}
	}
	for _, u := range m.Units {
		want[UnitsDir+"/"+u] = func(*tar.Header) error { return nil }
	}
	for _, h := range m.hooks() {
		want[HooksDir+"/"+h] = func(h *tar.Header) error {
			if h.Mode&0o100 == 0 {
				return fmt.Errorf("hook is not executable (mode %04o)", h.Mode&0o7777)
			}
			return nil
		}
	}
	seen := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("package %s: read archive: %w", m.Name, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		if hdr.Typeflag == tar.TypeDir {
			if err := validPath(name); err != nil {
				return nil, fmt.Errorf("package %s: directory %w", m.Name, err)
			}
			continue
		}
		check, ok := want[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("package %s: %s is in the archive but not in the manifest", m.Name, hdr.Name)
		case seen[name]:
			return nil, fmt.Errorf("package %s: %s is in the archive twice", m.Name, hdr.Name)
		case hdr.Typeflag != tar.TypeReg:
			return nil, fmt.Errorf("package %s: %s is not a regular file (tar type %q)", m.Name, hdr.Name, hdr.Typeflag)
		}
		seen[name] = true
		if err := check(hdr); err != nil {
			return nil, fmt.Errorf("package %s: %s: %w", m.Name, hdr.Name, err)
		}
	}
	for name := range want {
		if !seen[name] {
			return nil, fmt.Errorf("package %s: %s is in the manifest but not in the archive", m.Name, name)
		}
	}
	return m, nil
}

// ReadManifest reads only the manifest of a package archive from r — its first entry — and
// checks it (Validate), without reading the payload after it: what a package says of itself,
// for checks that do not install it. Read checks the whole archive.
func ReadManifest(r io.Reader) (*Manifest, error) {
	_, m, err := readManifest(r)
	return m, err
}

// readManifest opens the archive in r and reads and validates its first entry, the manifest;
// the tar reader is left after it.
func readManifest(r io.Reader) (*tar.Reader, *Manifest, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, nil, fmt.Errorf("package: not gzip-compressed: %w", err)
	}
	tr := tar.NewReader(gz)
	hdr, err := tr.Next()
	if err != nil {
		return nil, nil, fmt.Errorf("package: read archive: %w", err)
	}
	if hdr.Name != ManifestFile || hdr.Typeflag != tar.TypeReg {
		return nil, nil, fmt.Errorf("package: first entry is %q, want %s", hdr.Name, ManifestFile)
	}
	if hdr.Size > maxManifest {
		return nil, nil, fmt.Errorf("package: %s is %d bytes, more than %d", ManifestFile, hdr.Size, maxManifest)
	}
	raw, err := io.ReadAll(tr)
	if err != nil {
		return nil, nil, fmt.Errorf("package: read %s: %w", ManifestFile, err)
	}
	m := &Manifest{}
	if err := yaml.UnmarshalStrict(raw, m); err != nil {
		return nil, nil, fmt.Errorf("package: %s: %w", ManifestFile, err)
	}
	if err := m.Validate(); err != nil {
		return nil, nil, fmt.Errorf("package: %w", err)
	}
	return tr, m, nil
}
