package builders_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/edgefleet/edgefleet/test/builders"
)

func TestBuildChart(t *testing.T) {
	addTemplate := func(dir string) {
		if err := os.WriteFile(filepath.Join(dir, "templates", "extra.yaml"), []byte("# nothing\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Other modification times, same contents: helm writes the times into the archive, which
	// must not change with them.
	touch := func(dir string) {
		later := time.Now().Add(time.Hour)
		err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Chtimes(path, later, later)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	base := builders.BuildChart(t, "hello", "", nil)
	tests := []struct {
		name        string
		version     string
		edit        func(dir string)
		wantVersion string
		wantSame    bool // the same bytes as base
		wantExtra   bool
	}{
		{"built again", "", nil, "0.1.0", true, false},
		{"files touched", "", touch, "0.1.0", true, false},
		{"version given", "0.2.0", nil, "0.2.0", false, false},
		{"edited", "", addTemplate, "0.1.0", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := builders.BuildChart(t, "hello", tt.version, tt.edit)
			if same := bytes.Equal(got.Archive, base.Archive); same != tt.wantSame {
				t.Errorf("archive equal to the first build: %v, want %v", same, tt.wantSame)
			}
			if same := got.Digest == base.Digest; same != tt.wantSame {
				t.Errorf("digest %s, first build's %s: equal %v, want %v", got.Digest, base.Digest, same, tt.wantSame)
			}
			ch, err := loader.LoadArchive(bytes.NewReader(got.Archive))
			if err != nil {
				t.Fatalf("load the archive: %v", err)
			}
			if ch.Name() != "hello" || ch.Metadata.Version != tt.wantVersion || got.Name != "hello" || got.Version != tt.wantVersion {
				t.Errorf("chart %s-%s (BuiltChart %s-%s), want hello-%s", ch.Name(), ch.Metadata.Version, got.Name, got.Version, tt.wantVersion)
			}
			var names []string
			for _, f := range ch.Templates {
				names = append(names, f.Name)
			}
			for _, want := range []string{"templates/configmap.yaml", "templates/serviceaccount.yaml", "templates/deployment.yaml"} {
				if !slices.Contains(names, want) {
					t.Errorf("templates %v lack %s", names, want)
				}
			}
			if has := slices.Contains(names, "templates/extra.yaml"); has != tt.wantExtra {
				t.Errorf("templates %v: extra.yaml there %v, want %v", names, has, tt.wantExtra)
			}
		})
	}
}
