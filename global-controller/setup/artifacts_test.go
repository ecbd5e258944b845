package setup

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/mongodb"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestJanitorCompactsWastefulDatabase runs the janitor's compaction step on a real embedded
// FerretDB: with little deleted it leaves the database alone, after deleting more than
// compactSlack it compacts it down to near what is left.
func TestJanitorCompactsWastefulDatabase(t *testing.T) {
	srv, err := mongodb.StartEmbedded(filepath.Join(t.TempDir(), "db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	client, err := mongodb.Connect(t.Context(), srv.URI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(t.Context()) })
	store, err := artifacts.Open(t.Context(), client.Database("edgefleet"), artifacts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	disk := func() (int64, error) { return srv.DiskBytes("edgefleet") }
	const size = 8 << 20
	var ids []string
	for i := range 10 {
		data, _ := testutil.RandomContent(size, uint64(200+i))
		spec := restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "janitor", Version: strconv.Itoa(i), Architecture: "amd64"}
		ids = append(ids, builders.PutArtifact(t, store, spec, data).ID)
	}
	step := func(deleted int) int64 {
		t.Helper()
		for _, id := range ids[:deleted] {
			if err := store.Delete(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}
		ids = ids[deleted:]
		if err := compactIfWasteful(t.Context(), store, disk, logr.Discard()); err != nil {
			t.Fatal(err)
		}
		n, err := disk()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	full, err := disk()
	if err != nil {
		t.Fatal(err)
	}
	if n := step(1); n < full {
		t.Errorf("after deleting 8 of 80 MiB the database shrank from %d to %d MiB: compacted for little", full>>20, n>>20)
	}
	live := int64(size)
	if n := step(len(ids) - 1); n > live*3/2+5<<20 {
		t.Errorf("after deleting all but %d MiB the database takes %d MiB on disk (%d MiB full)", live>>20, n>>20, full>>20)
	}

	// A compaction whose files did not shrink is not logged as one that did.
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
	same := func() (int64, error) { return 1 << 30, nil }
	if err := compactIfWasteful(t.Context(), store, same, log); err != nil {
		t.Fatal(err)
	}
	if len(logged) != 1 || strings.Contains(logged[0], `"compacted the embedded database"`) || !strings.Contains(logged[0], "have not shrunk") {
		t.Errorf("a compaction that freed nothing logged %q", logged)
	}
}
