package setup

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/pkg/siteimage/siteimagetest"
)

// TestPackImport: a site image's pack goes into the site cache, each artifact published under
// its digest; a second run reads nothing; one artifact already cached is not imported again; a
// medium without a pack imports nothing; a damaged artifact fails the import and publishes
// nothing under its digest; bad flags are named.
func TestPackImport(t *testing.T) {
	files := siteimagetest.PackFiles(t, 70000, 10, 4096)
	img, _ := siteimagetest.Packed(t, "stores/edge-1", files)
	cacheDir := t.TempDir()
	// One artifact is in the cache already (an earlier, broken import).
	if err := os.MkdirAll(filepath.Join(cacheDir, "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(files[1].Path, filepath.Join(cacheDir, "sha256", files[1].SHA256)); err != nil {
		t.Fatal(err)
	}
	o := PackImportOptions{From: img, CacheDir: cacheDir, Timeout: 10 * time.Minute}
	res, err := RunPackImport(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if want := (PackImport{Release: "stores/edge-1", Artifacts: 3, Imported: 2, Bytes: 70000 + 4096}); res != want {
		t.Errorf("import: %+v, want %+v", res, want)
	}
	if !strings.HasPrefix(res.String(), "EDGEFLEET-PACK release=stores/edge-1 artifacts=3 imported=2 ") {
		t.Errorf("console line %q", res)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(cacheDir, "sha256", f.SHA256))
		want, _ := os.ReadFile(f.Path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the cache: %v (%d bytes, want %d)", f.Name, err, len(got), len(want))
		}
	}
	again, err := RunPackImport(t.Context(), o)
	if err != nil || !again.Before || again.Imported != 0 {
		t.Errorf("second import: %+v, %v; want imported before, nothing read", again, err)
	}

	if res, err := RunPackImport(t.Context(), PackImportOptions{From: siteimagetest.Base(t), CacheDir: t.TempDir(), Timeout: time.Minute}); err != nil || res.Release != "" {
		t.Errorf("a medium without a pack: %+v, %v; want nothing imported, no error", res, err)
	} else if !strings.Contains(res.String(), "no site pack") {
		t.Errorf("console line %q", res)
	}

	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-4096+5] ^= 0xff // the last artifact
	damaged := filepath.Join(t.TempDir(), "damaged.iso")
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := t.TempDir()
	if _, err := RunPackImport(t.Context(), PackImportOptions{From: damaged, CacheDir: fresh, Timeout: time.Minute}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged artifact: %v, want an error saying the stick is damaged", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, "sha256", files[2].SHA256)); err == nil {
		t.Error("the damaged artifact was published")
	}
	if des, _ := os.ReadDir(filepath.Join(fresh, packsDir)); len(des) != 0 {
		t.Error("a failed import was recorded as done")
	}

	for _, c := range []struct {
		o    PackImportOptions
		want string
	}{
		{PackImportOptions{CacheDir: fresh, Timeout: 1}, "--from"},
		{PackImportOptions{From: img, Timeout: 1}, "--cache-dir"},
		{PackImportOptions{From: img, CacheDir: fresh}, "--timeout"},
		{PackImportOptions{From: filepath.Join(fresh, "missing.iso"), CacheDir: fresh, Timeout: time.Minute}, "missing.iso"},
	} {
		if _, err := RunPackImport(t.Context(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.o, err, c.want)
		}
	}
}
