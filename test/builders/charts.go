package builders

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// archiveModTime is the modification time of every file of the archives this package builds (charts,
// images), so the same files make the same archive.
var archiveModTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

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
	var editErr func(string) error
	if edit != nil {
		editErr = func(dir string) error { edit(dir); return nil }
	}
	c, err := BuildChartIn(t.TempDir(), name, version, editErr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// BuildChartIn is BuildChart for programs that are not tests (the demo): the chart's copy and
// the archive go to dir.
func BuildChartIn(dir, name, version string, edit func(dir string) error) (BuiltChart, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return BuiltChart{}, err
	}
	src := filepath.Join(root, "hack", "charts", name)
	chartDir := filepath.Join(dir, name)
	if err := os.CopyFS(chartDir, os.DirFS(src)); err != nil {
		return BuiltChart{}, fmt.Errorf("copy chart %s: %w", src, err)
	}
	if edit != nil {
		if err := edit(chartDir); err != nil {
			return BuiltChart{}, fmt.Errorf("chart %s: edit: %w", name, err)
		}
	}
	err = filepath.WalkDir(chartDir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(path, archiveModTime, archiveModTime)
	})
	if err != nil {
		return BuiltChart{}, fmt.Errorf("chart %s: %w", name, err)
	}
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return BuiltChart{}, fmt.Errorf("chart %s: load: %w", name, err)
	}
	if version != "" {
		ch.Metadata.Version = version
	}
	path, err := chartutil.Save(ch, dir)
	if err != nil {
		return BuiltChart{}, fmt.Errorf("chart %s: package: %w", name, err)
	}
	archive, err := os.ReadFile(path)
	if err != nil {
		return BuiltChart{}, err
	}
	sum := sha256.Sum256(archive)
	return BuiltChart{Archive: archive, Digest: hex.EncodeToString(sum[:]), Name: ch.Metadata.Name, Version: ch.Metadata.Version}, nil
}
