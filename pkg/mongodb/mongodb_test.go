package mongodb

import (
	"os"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestEmbeddedRoundTripAndRestart writes a document through the real wire protocol, restarts
// the embedded server on the same directory, and reads it back.
func TestEmbeddedRoundTripAndRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	for i, step := range []string{"write", "read after restart"} {
		srv, err := StartEmbedded(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Connect(t.Context(), srv.URI)
		if err != nil {
			t.Fatal(err)
		}
		coll := c.Database("edgefleet").Collection("probe")
		if i == 0 {
			if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: "kept"}, {Key: "v", Value: 42}}); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
		} else {
			var doc struct{ V int }
			if err := coll.FindOne(t.Context(), bson.D{{Key: "_id", Value: "kept"}}).Decode(&doc); err != nil || doc.V != 42 {
				t.Fatalf("%s: doc %+v, err %v", step, doc, err)
			}
		}
		if err := c.Disconnect(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %v, want 0700", fi.Mode().Perm())
	}
}

// TestFreeBytes measures the free space of an embedded server's directory, and refuses to
// guess for an external server.
func TestFreeBytes(t *testing.T) {
	free, err := (&Server{dir: t.TempDir()}).FreeBytes()
	if err != nil || free <= 0 {
		t.Errorf("FreeBytes of an embedded server = %d, %v; want the free space of its directory's file system", free, err)
	}
	if _, err := External("mongodb://db:27017").FreeBytes(); err == nil {
		t.Error("FreeBytes of an external server succeeded; its disk cannot be seen from here")
	}
}
