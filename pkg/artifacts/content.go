package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/packages"
)

// checkContent reads the stored content of an upload whose kind has a format the store knows,
// and returns a *ValidationError (field "content") when the content is not of that format or
// contradicts the artifact's metadata. A binary-package must be a package archive that
// pkg/packages reads (its manifest valid, every file as the manifest says) whose manifest names
// the artifact's name and version, and its architecture ("all" fits any, and only "all" fits
// noarch): a site would otherwise learn of a broken package only when its BPA opens it.
func (s *Store) checkContent(ctx context.Context, spec restv1.ArtifactSpec, digest string) error {
	if spec.Kind != restv1.KindBinaryPackage {
		return nil
	}
	var m *packages.Manifest
	var invalid error
	if err := s.readBlob(ctx, digest, "check of binary-package "+spec.Name, func(r io.Reader) {
		if m, invalid = packages.Read(r); invalid == nil {
			// The archive may end before the blob does (gzip's trailer read, padding after it).
			_, invalid = io.Copy(io.Discard, r)
		}
	}); err != nil {
		return err
	}
	if invalid != nil {
		return &ValidationError{"content", fmt.Sprintf("not a binary package (docs/packages.md): %v", invalid)}
	}
	switch {
	case m.Name != spec.Name:
		return &ValidationError{"content", fmt.Sprintf("the package's manifest names package %q, the artifact %q", m.Name, spec.Name)}
	case m.Version != spec.Version:
		return &ValidationError{"content", fmt.Sprintf("the package's manifest says version %q, the artifact %q", m.Version, spec.Version)}
	case m.Architecture != spec.Architecture && m.Architecture != "all":
		return &ValidationError{"content", fmt.Sprintf("the package's manifest says architecture %q, the artifact %q", m.Architecture, spec.Architecture)}
	}
	return nil
}

// Manifest reads the manifest of the binary package stored with this sha256 — only the
// archive's first entry, not its payload (checkContent read it all at upload). An error wraps
// ErrNotFound when the store does not hold the content, and is a *ValidationError (field
// content) when the content is no valid package (stored before packages were checked).
func (s *Store) Manifest(ctx context.Context, digest string) (*packages.Manifest, error) {
	var m *packages.Manifest
	var invalid error
	if err := s.readBlob(ctx, digest, "manifest of sha256:"+digest, func(r io.Reader) { m, invalid = packages.ReadManifest(r) }); err != nil {
		return nil, err
	}
	if invalid != nil {
		return nil, &ValidationError{"content", fmt.Sprintf("not a binary package (docs/packages.md): %v", invalid)}
	}
	return m, nil
}

// KindsOf lists the kinds of the artifacts whose content has this sha256, each once, sorted:
// none when the store holds no such content.
func (s *Store) KindsOf(ctx context.Context, digest string) ([]restv1.ArtifactKind, error) {
	cur, err := s.artifacts.Find(ctx, bson.D{{Key: "sha256", Value: digest}}, options.Find().SetProjection(bson.D{{Key: "kind", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("find artifacts of sha256:%s: %w", digest, err)
	}
	var docs []struct {
		Kind string `bson:"kind"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("find artifacts of sha256:%s: %w", digest, err)
	}
	var kinds []restv1.ArtifactKind
	for _, d := range docs {
		kinds = append(kinds, restv1.ArtifactKind(d.Kind))
	}
	slices.Sort(kinds)
	return slices.Compact(kinds), nil
}

// readBlob streams the blob of digest to read, as a download within the transfer memory budget
// (what names the transfer), and stops sending once read returns. The request's context ends
// only when its client gives up: the wait for transfer memory and the read are bounded here
// too (a 2 GiB package reads in well under a minute).
func (s *Store) readBlob(ctx context.Context, digest, what string, read func(io.Reader)) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	blob, err := s.OpenBlob(ctx, digest)
	if err != nil {
		return err
	}
	lease, err := s.budget.LeaseDownload(ctx, what)
	if err != nil {
		return err
	}
	defer lease.Release()
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		err := blob.WriteRange(ctx, pw, 0, blob.Size, lease.Batch)
		pw.CloseWithError(err)
		sent <- err
	}()
	read(pr)
	pr.CloseWithError(errStopReading) // a writer still sending is told to stop
	if err := <-sent; err != nil && !errors.Is(err, errStopReading) {
		return fmt.Errorf("read blob sha256:%s: %w", digest, err)
	}
	return nil
}

// checkTimeout bounds readBlob.
const checkTimeout = 5 * time.Minute

// errStopReading ends a blob's read once its reader has what it needs.
var errStopReading = errors.New("the reader stopped")
