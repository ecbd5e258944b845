package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// chartModTime is the modification time of every file of a chart BuildChart packages, so the
// same files make the same archive.
var chartModTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// BuiltChart is a Helm chart archive (.tgz) built for a test.
type BuiltChart struct {
	// Archive is the .tgz.
	Archive []byte
	// Digest is the archive's sha256, lower-case hex.
	Digest string
	// Name and Version are the chart's, from its Chart.yaml.
	Name, Version string
}

// BuildChart packages the test-bed chart name from hack/charts/<name> with the helm SDK. version,
// when not empty, replaces the version of its Chart.yaml. edit, when not nil, may change the
// chart directory's copy before it is packaged (a broken template, say).
//
// The archive is deterministic: every file's modification time is set to a fixed date first (helm
// writes the files' times into the tar headers, and no time into the gzip header), so the same
// files give the same bytes and Digest.
func BuildChart(t testing.TB, name, version string, edit func(dir string)) BuiltChart {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "hack", "charts", name)
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatalf("copy chart %s: %v", src, err)
	}
	if edit != nil {
		edit(dir)
	}
	err = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(path, chartModTime, chartModTime)
	})
	if err != nil {
		t.Fatalf("chart %s: %v", name, err)
	}
	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatalf("chart %s: load: %v", name, err)
	}
	if version != "" {
		ch.Metadata.Version = version
	}
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatalf("chart %s: package: %v", name, err)
	}
	archive, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	return BuiltChart{Archive: archive, Digest: hex.EncodeToString(sum[:]), Name: ch.Metadata.Name, Version: ch.Metadata.Version}
}
