package builders

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/edgefleet/edgefleet/test/testutil"
)

// BuiltImage is a container image archive built from its recipe in hack/images/<name>.
type BuiltImage struct {
	// Name is the recipe's (the directory's) name.
	Name string
	// Tag is the reference the image is imported under and pods name it by, such as
	// registry.k8s.io/pause:3.10.
	Tag string
	// Archive is a tar archive of an OCI image layout holding the image, its index.json entry
	// annotated with Tag (io.containerd.image.name, which containerd's import names it by).
	Archive []byte
	// Digest is the archive's sha256, lower-case hex.
	Digest string
}

// imageRecipe is hack/images/<name>/image.yaml.
type imageRecipe struct {
	// Tag is the image's full reference, registry included.
	Tag string `json:"tag"`
	// Program is the image's only file, /<program>, and its entrypoint.
	Program string `json:"program"`
	// From is where the program comes from: "source", the recipe directory's Go program
	// (a main package), built static now; or "bin", bin/<program> (built by hack/tools.sh).
	From string `json:"from"`
}

// Where an image's program comes from (imageRecipe.From).
const (
	imageFromSource = "source"
	imageFromBin    = "bin"
)

// Annotations of an image's entry in an OCI layout's index.json: containerd's import names the
// image by the first (the full reference), other tools by the second (the tag alone).
const (
	annotationContainerdImageName = "io.containerd.image.name"
	annotationOCIRefName          = "org.opencontainers.image.ref.name"
)

// BuildImage builds the image of hack/images/<name> (see BuildImageIn).
func BuildImage(t testing.TB, name string) BuiltImage {
	t.Helper()
	img, err := BuildImageIn(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// BuildImageIn builds the image of hack/images/<name> with go-containerregistry, in dir (for
// programs that are not tests, such as the demo): one layer holding the recipe's program,
// its entrypoint, for linux on this machine's architecture; OCI media types throughout; written
// as an OCI image layout and archived with tar. Nothing is pulled or pushed. The same program
// gives the same archive bytes and Digest (fixed file times, no creation time).
func BuildImageIn(dir, imageName string) (BuiltImage, error) {
	root, err := testutil.RepoRoot()
	if err != nil {
		return BuiltImage{}, err
	}
	fail := func(err error) (BuiltImage, error) { return BuiltImage{}, fmt.Errorf("image %s: %w", imageName, err) }
	recipeDir := filepath.Join(root, "hack", "images", imageName)
	raw, err := os.ReadFile(filepath.Join(recipeDir, "image.yaml"))
	if err != nil {
		return fail(err)
	}
	var r imageRecipe
	if err := yaml.UnmarshalStrict(raw, &r); err != nil {
		return fail(fmt.Errorf("image.yaml: %w", err))
	}
	tag, err := name.NewTag(r.Tag, name.StrictValidation)
	if err != nil {
		return fail(fmt.Errorf("image.yaml: tag: %w", err))
	}
	if tag.Name() != r.Tag {
		return fail(fmt.Errorf("image.yaml: tag %q: name it in full, registry included (%s)", r.Tag, tag.Name()))
	}
	work, err := os.MkdirTemp(dir, imageName+"-")
	if err != nil {
		return fail(err)
	}
	program, err := imageProgram(root, recipeDir, work, r)
	if err != nil {
		return fail(err)
	}
	layer, err := programLayer(r.Program, program)
	if err != nil {
		return fail(err)
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		return fail(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fail(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/" + r.Program}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fail(err)
	}
	layoutDir := filepath.Join(work, "oci")
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return fail(fmt.Errorf("OCI layout: %w", err))
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationContainerdImageName: r.Tag,
		annotationOCIRefName:          tag.TagStr(),
	})); err != nil {
		return fail(fmt.Errorf("OCI layout: %w", err))
	}
	archive, err := tarDir(layoutDir)
	if err != nil {
		return fail(fmt.Errorf("archive the OCI layout: %w", err))
	}
	sum := sha256.Sum256(archive)
	return BuiltImage{Name: imageName, Tag: r.Tag, Archive: archive, Digest: hex.EncodeToString(sum[:])}, nil
}

// imageProgram is the program of recipe r (in recipeDir): built static into work, or read
// from bin/.
func imageProgram(root, recipeDir, work string, r imageRecipe) ([]byte, error) {
	switch r.From {
	case imageFromSource:
		out := filepath.Join(work, r.Program)
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
		build.Dir = recipeDir
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %w: %s", r.Program, err, msg)
		}
		return os.ReadFile(out)
	case imageFromBin:
		b, err := os.ReadFile(filepath.Join(root, "bin", r.Program))
		if err != nil {
			return nil, fmt.Errorf("%w (run hack/tools.sh %s first)", err, r.Program)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("image.yaml: from %q: want %q or %q", r.From, imageFromSource, imageFromBin)
	}
}

// programLayer is an OCI layer holding one executable file, /<file>.
func programLayer(file string, program []byte) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: file, Mode: 0o755, Size: int64(len(program)), Typeflag: tar.TypeReg, ModTime: archiveModTime}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(program); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
}

// tarDir archives the regular files under dir, by their paths relative to it, in lexical
// order, with fixed times and owners: the same files give the same bytes.
func tarDir(dir string) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: archiveModTime}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
