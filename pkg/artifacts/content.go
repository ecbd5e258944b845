package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

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
	// The request's context ends only when its client gives up: the wait for transfer memory
	// and the read are bounded here too (a 2 GiB package reads in well under a minute).
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	blob, err := s.OpenBlob(ctx, digest)
	if err != nil {
		return err
	}
	lease, err := s.budget.LeaseDownload(ctx, "check of binary-package "+spec.Name)
	if err != nil {
		return err
	}
	defer lease.Release()
	pr, pw := io.Pipe()
	read := make(chan error, 1)
	go func() {
		err := blob.WriteRange(ctx, pw, 0, blob.Size, lease.Batch)
		pw.CloseWithError(err)
		read <- err
	}()
	m, err := packages.Read(pr)
	if err == nil {
		// The archive may end before the blob does (gzip's trailer read, padding after it).
		_, err = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(errStopReading) // a writer still sending is told to stop
	if readErr := <-read; readErr != nil && !errors.Is(readErr, errStopReading) {
		return fmt.Errorf("read blob sha256:%s to check it: %w", digest, readErr)
	}
	if err != nil {
		return &ValidationError{"content", fmt.Sprintf("not a binary package (docs/packages.md): %v", err)}
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

// checkTimeout bounds checkContent.
const checkTimeout = 5 * time.Minute

// errStopReading ends a blob's read once its reader has what it needs.
var errStopReading = errors.New("the reader stopped")
