package builders

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
)

// PutArtifact stores data in s as the artifact spec describes (through an upload session, as
// the API does: create with the sha256, append, finish) and returns it; it fails the test on
// any error.
func PutArtifact(t testing.TB, s *artifacts.Store, spec restv1.ArtifactSpec, data []byte) restv1.Artifact {
	t.Helper()
	sum := sha256.Sum256(data)
	up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec, SHA256: hex.EncodeToString(sum[:])}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	a, err := s.Finish(t.Context(), up.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}
