package builders_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestBuildImage builds every image of hack/images and reads each back as an OCI image layout:
// one image, named by its tag for containerd's import, OCI media types, for linux, one layer
// holding its program (the entrypoint) executable. The same program gives the same archive, and
// the coredns image's tag is the version of its binary.
func TestBuildImage(t *testing.T) {
	root, err := testutil.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, tag string }{
		{"pause", "registry.k8s.io/pause:3.10"},
		{"webapp", "edgefleet.io/webapp:1.0.0"},
		{"coredns", "registry.k8s.io/coredns/coredns:v1.15.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := builders.BuildImage(t, tc.name)
			if img.Tag != tc.tag || img.Name != tc.name {
				t.Errorf("image %s tagged %s, want %s tagged %s", img.Name, img.Tag, tc.name, tc.tag)
			}
			program := readImage(t, img)
			if tc.name == "coredns" {
				want, err := os.ReadFile(filepath.Join(root, "bin", "coredns"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(program, want) {
					t.Errorf("the image's /coredns is not bin/coredns")
				}
				out, err := exec.Command(filepath.Join(root, "bin", "coredns"), "-version").Output()
				if err != nil {
					t.Fatal(err)
				}
				if v := "CoreDNS-" + strings.TrimPrefix(tc.tag[strings.LastIndex(tc.tag, ":")+1:], "v"); !strings.HasPrefix(string(out), v+"\n") {
					t.Errorf("bin/coredns -version: %q, want %s (the image's tag)", out, v)
				}
			}
		})
	}
	t.Run("same program, same archive", func(t *testing.T) {
		a, b := builders.BuildImage(t, "pause"), builders.BuildImage(t, "pause")
		if a.Digest != b.Digest || !bytes.Equal(a.Archive, b.Archive) {
			t.Errorf("two builds of pause: %s and %s", a.Digest, b.Digest)
		}
	})
}

// readImage reads img's archive as an OCI image layout, checks it and returns the image's
// program.
func readImage(t *testing.T, img builders.BuiltImage) []byte {
	t.Helper()
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(img.Archive))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("the archive is no OCI image layout: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(m.Manifests))
	}
	desc := m.Manifests[0]
	if got := desc.Annotations["io.containerd.image.name"]; got != img.Tag {
		t.Errorf("index.json: io.containerd.image.name %q, want %q", got, img.Tag)
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", desc.MediaType)
	}
	image, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/" + img.Name}; cf.OS != "linux" || !slices.Equal(cf.Config.Entrypoint, want) {
		t.Errorf("config: os %s, entrypoint %v; want linux, %v", cf.OS, cf.Config.Entrypoint, want)
	}
	layers, err := image.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	return layerFile(t, layers[0], img.Name)
}

// layerFile is the one file of layer, which must be name, executable.
func layerFile(t *testing.T, layer v1.Layer, name string) []byte {
	t.Helper()
	if mt, err := layer.MediaType(); err != nil || mt != types.OCILayer {
		t.Errorf("layer media type %s (%v), want %s", mt, err, types.OCILayer)
	}
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != name || hdr.Mode&0o111 == 0 || hdr.Size == 0 {
		t.Errorf("layer: %s, mode %o, %d bytes; want the executable %s", hdr.Name, hdr.Mode, hdr.Size, name)
	}
	data, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("the layer holds more than %s (%v)", name, err)
	}
	return data
}
