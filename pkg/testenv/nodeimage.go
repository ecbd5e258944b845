package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NodeImage is the image of the node stack tests' pods (testdata/tiny): imported from an
// archive, never pulled.
const NodeImage = "edgefleet.test/tiny:1"

// BuildNodeImage builds testdata/tiny (static, in dir) and returns a docker archive of one
// image, tagged with each of tags (NodeImage when none): one layer holding /tiny, the
// entrypoint. Without arguments tiny waits for a signal as a pod's pause container does, so the
// same image may stand in for the sandbox image.
func BuildNodeImage(ctx context.Context, dir string, tags ...string) ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if len(tags) == 0 {
		tags = []string{NodeImage}
	}
	binPath := filepath.Join(dir, "tiny")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binPath, "./pkg/testenv/testdata/tiny")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the image's binary: %w: %s", err, out)
	}
	binary, err := os.ReadFile(binPath)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: "tiny", Mode: 0o755, Size: int64(len(binary)), Typeflag: tar.TypeReg}); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/tiny"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		tag, err := name.NewTag(t)
		if err != nil {
			return nil, fmt.Errorf("image tag: %w", err)
		}
		refs[tag] = img
	}
	var archive bytes.Buffer
	if err := tarball.MultiRefWrite(refs, &archive); err != nil {
		return nil, fmt.Errorf("image archive: %w", err)
	}
	return archive.Bytes(), nil
}
