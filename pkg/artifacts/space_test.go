package artifacts_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// TestCompactGivesDeletedSpaceBack stores artifacts in the embedded FerretDB, deletes most of
// them and compacts: the database's files shrink to near what is left.
func TestCompactGivesDeletedSpaceBack(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{})
	disk := func() int64 {
		t.Helper()
		n, err := embedded.DiskBytes(db.Name())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const size, kept = 8 << 20, 1
	var ids []string
	for i := range 5 {
		data, _ := testutil.RandomContent(size, uint64(100+i))
		ids = append(ids, builders.PutArtifact(t, s, spec("compact", strconv.Itoa(i)), data).ID)
	}
	full := disk()
	for _, id := range ids[kept:] {
		if err := s.Delete(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	live, err := s.LiveBytes(t.Context())
	if err != nil || live != kept*size {
		t.Fatalf("LiveBytes = %d, %v; want %d", live, err, kept*size)
	}
	deleted := disk()
	t.Logf("on disk: %d MiB with %d MiB stored, %d MiB after deleting all but %d MiB", full>>20, 5*size>>20, deleted>>20, live>>20)
	if err := s.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	compacted := disk()
	t.Logf("on disk after Compact: %d MiB", compacted>>20)
	// FerretDB stores documents as JSON, binary data as base64 (4/3), and SQLite's
	// write-ahead log keeps up to 4 MiB: near is 1.5 times the live bytes and 5 MiB.
	if compacted > live*3/2+5<<20 {
		t.Errorf("after deleting all but %d MiB and compacting, the database takes %d MiB on disk", live>>20, compacted>>20)
	}
}

// TestMetrics gathers the store's metrics: the budget's limit, and the live and disk sizes.
func TestMetrics(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{Budget: artifacts.NewBudget(32 << 20)})
	data, digest := testutil.RandomContent(300_000, 110)
	up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("metrics", "1"), SHA256: digest}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(t.Context(), up.ID, ""); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := artifacts.RegisterMetrics(reg, s, func() (int64, error) { return embedded.DiskBytes(db.Name()) }); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		got[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
	}
	if got["edgefleet_artifact_transfer_memory_limit_bytes"] != 32<<20 || got["edgefleet_artifact_transfer_memory_in_use_bytes"] != 0 ||
		got["edgefleet_artifact_store_live_bytes"] != float64(len(data)) || got["edgefleet_artifact_store_disk_bytes"] < float64(len(data)) {
		t.Errorf("metrics = %v", got)
	}
}
