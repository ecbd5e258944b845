package artifacts_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	restv1 "github.com/edgefleet/edgefleet/api/rest/v1"
	"github.com/edgefleet/edgefleet/pkg/artifacts"
	"github.com/edgefleet/edgefleet/pkg/mongodb"
	"github.com/edgefleet/edgefleet/test/builders"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// client talks to one embedded FerretDB (the real MongoDB wire protocol) for the whole package;
// every test gets a database of its own (a SQLite file of its own).
var (
	client   *mongo.Client
	embedded *mongodb.Server
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "edgefleet-artifacts-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	embedded, err = mongodb.StartEmbedded(filepath.Join(dir, "db"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := embedded.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop FerretDB:", err)
		}
	}()
	client, err = mongodb.Connect(context.Background(), embedded.URI)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	return m.Run()
}

func newDB(t *testing.T) *mongo.Database {
	t.Helper()
	db := client.Database(fmt.Sprintf("t%d", rand.Uint64()))
	t.Cleanup(func() { _ = db.Drop(context.Background()) })
	return db
}

func open(t *testing.T, db *mongo.Database, opts artifacts.Options) *artifacts.Store {
	t.Helper()
	s, err := artifacts.Open(t.Context(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func spec(name, version string) restv1.ArtifactSpec {
	return restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: name, Version: version, Architecture: "amd64"}
}

func read(t *testing.T, s *artifacts.Store, digest string, start, length int64) []byte {
	t.Helper()
	b, err := s.OpenBlob(t.Context(), digest)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := b.WriteRange(t.Context(), &out, start, length, artifacts.ReadBatch); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// count counts the documents of a collection; "blobs.chunks" stands for the chunk collections
// of every blob and upload ("blobs.ID.chunks").
func count(t *testing.T, db *mongo.Database, coll string) int64 {
	t.Helper()
	colls := []string{coll}
	if coll == "blobs.chunks" {
		names, err := db.ListCollectionNames(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		colls = nil
		for _, name := range names {
			if strings.HasPrefix(name, "blobs.") && strings.HasSuffix(name, ".chunks") {
				colls = append(colls, name)
			}
		}
	}
	var total int64
	for _, c := range colls {
		n, err := db.Collection(c).CountDocuments(t.Context(), bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// failingReader returns its data and then an error, like a client cut off mid-request.
type failingReader struct {
	r io.Reader
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errors.New("connection reset by peer")
	}
	return n, err
}

func TestRoundTripAndRanges(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{})
	size := 3*artifacts.ChunkSize*flush + 12345 // several flushes and a partial last chunk
	data, digest := testutil.RandomContent(size, 1)
	up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("kubelet", "1.36.3"), SHA256: digest}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	off, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(data))
	if err != nil || off != int64(size) {
		t.Fatalf("Append = %d, %v; want %d", off, err, size)
	}
	a, err := s.Finish(t.Context(), up.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if a.SHA256 != digest || a.Size != int64(size) || a.Creator != "alice" {
		t.Errorf("artifact = %+v", a)
	}
	if got := read(t, s, digest, 0, int64(size)); !bytes.Equal(got, data) {
		t.Fatal("content read back differs")
	}
	for _, r := range [][2]int64{{0, 1}, {artifacts.ChunkSize - 1, 2}, {5000, 3 * artifacts.ChunkSize}, {int64(size) - 10, 10}} {
		if got := read(t, s, digest, r[0], r[1]); !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
			t.Errorf("range %v differs", r)
		}
	}
	if n := count(t, db, "uploads"); n != 0 {
		t.Errorf("%d upload sessions left after finish", n)
	}
}

const flush = 32

// TestResumeAfterCutAndRestart cuts an append half way, reopens the store (as after a controller
// restart), and resumes from the offset the server reports, in uneven pieces.
func TestResumeAfterCutAndRestart(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{})
	size := 2*artifacts.ChunkSize*flush + 777
	data, digest := testutil.RandomContent(size, 2)
	up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("etcd", "3.6.16")}, "bob")
	if err != nil {
		t.Fatal(err)
	}
	cut := artifacts.ChunkSize*flush + 4321
	off, err := s.Append(t.Context(), up.ID, 0, &failingReader{bytes.NewReader(data[:cut])})
	if err == nil {
		t.Fatal("Append of a cut stream succeeded")
	}
	if off != int64(cut) {
		t.Fatalf("after the cut the upload is at %d, want every received byte (%d)", off, cut)
	}

	s = open(t, db, artifacts.Options{}) // restart
	got, err := s.GetUpload(t.Context(), up.ID)
	if err != nil || got.Offset != int64(cut) {
		t.Fatalf("after restart: upload %+v, %v", got, err)
	}
	// A chunk at the wrong offset is refused with the right one.
	var oe *artifacts.OffsetError
	if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(data)); !errors.As(err, &oe) || oe.Expected != int64(cut) {
		t.Fatalf("append at 0: %v, want OffsetError expecting %d", err, cut)
	}
	for off < int64(size) {
		end := min(off+100_003, int64(size))
		if off, err = s.Append(t.Context(), up.ID, off, bytes.NewReader(data[off:end])); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.Finish(t.Context(), up.ID, digest)
	if err != nil {
		t.Fatal(err)
	}
	if a.SHA256 != digest {
		t.Fatalf("resumed upload has sha256 %s, want %s", a.SHA256, digest)
	}
	if !bytes.Equal(read(t, s, digest, 0, int64(size)), data) {
		t.Fatal("resumed content differs")
	}
}

func TestWrongDigestStoresNothing(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{})
	data, digest := testutil.RandomContent(300_000, 3)
	_, other := testutil.RandomContent(10, 4)
	up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("bad", "1"), SHA256: other}, "eve")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	_, err = s.Finish(t.Context(), up.ID, "")
	var de *artifacts.DigestError
	if !errors.As(err, &de) || de.Expected != other || de.Actual != digest {
		t.Fatalf("Finish = %v, want DigestError with both digests", err)
	}
	for _, coll := range []string{"artifacts", "uploads", "blobs.files", "blobs.chunks"} {
		if n := count(t, db, coll); n != 0 {
			t.Errorf("%s has %d documents after a digest mismatch", coll, n)
		}
	}
}

// TestSameBytesStoredOnce uploads the same content concurrently as two artifacts.
func TestSameBytesStoredOnce(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{})
	data, digest := testutil.RandomContent(500_000, 5)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("same", fmt.Sprint(i)), SHA256: digest}, "x")
			if err == nil {
				_, err = s.Append(t.Context(), up.ID, 0, bytes.NewReader(data))
			}
			if err == nil {
				_, err = s.Finish(t.Context(), up.ID, "")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "blobs.files"); n != 1 {
		t.Errorf("%d blobs for one content, want 1", n)
	}
	if n := count(t, db, "blobs.chunks"); n != int64((len(data)+artifacts.ChunkSize-1)/artifacts.ChunkSize) {
		t.Errorf("%d chunks stored, want one blob's", n)
	}
	list, err := s.List(t.Context(), artifacts.Filter{Name: "same"}, 10, "")
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	// Deleting one keeps the bytes for the other; deleting both removes them.
	if err := s.Delete(t.Context(), list.Items[0].ID); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, s, digest, 0, int64(len(data))), data) {
		t.Fatal("content gone while another artifact uses it")
	}
	if err := s.Delete(t.Context(), list.Items[1].ID); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "blobs.chunks"); n != 0 {
		t.Errorf("%d chunks left after the last artifact was deleted", n)
	}
}

func TestConflictAndValidation(t *testing.T) {
	s := open(t, newDB(t), artifacts.Options{})
	data, digest := testutil.RandomContent(10, 6)
	a := builders.PutArtifact(t, s, spec("dup", "1"), data)
	var ce *artifacts.ConflictError
	if _, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("dup", "1")}, "x"); !errors.As(err, &ce) || ce.ID != a.ID {
		t.Errorf("second upload of the same artifact: %v, want ConflictError naming %s", err, a.ID)
	}
	size := int64(5)
	tests := []struct {
		req   restv1.CreateUpload
		field string
	}{
		{restv1.CreateUpload{ArtifactSpec: restv1.ArtifactSpec{Kind: "rpm", Name: "a", Version: "1", Architecture: "amd64"}}, "kind"},
		{restv1.CreateUpload{ArtifactSpec: spec("Bad Name", "1")}, "name"},
		{restv1.CreateUpload{ArtifactSpec: spec("a", "")}, "version"},
		{restv1.CreateUpload{ArtifactSpec: restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "a", Version: "1", Architecture: "x86 64"}}, "architecture"},
		{restv1.CreateUpload{ArtifactSpec: restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "a", Version: "1", Architecture: "amd64", Labels: map[string]string{"bad key!": "v"}}}, "labels"},
		{restv1.CreateUpload{ArtifactSpec: spec("a", "1"), SHA256: "abc"}, "sha256"},
		{restv1.CreateUpload{ArtifactSpec: spec("a", "1"), Size: func() *int64 { n := -size; return &n }()}, "size"},
	}
	for _, tt := range tests {
		var ve *artifacts.ValidationError
		if _, err := s.CreateUpload(t.Context(), tt.req, "x"); !errors.As(err, &ve) || ve.Field != tt.field {
			t.Errorf("CreateUpload(%+v) = %v, want a ValidationError on %s", tt.req, err, tt.field)
		}
	}
	// More bytes than declared are refused.
	up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("sized", "1"), Size: &size}, "x")
	if err != nil {
		t.Fatal(err)
	}
	var ve *artifacts.ValidationError
	if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader([]byte("123456"))); !errors.As(err, &ve) {
		t.Errorf("6 bytes into a 5-byte upload: %v", err)
	}
	if _, err := s.Finish(t.Context(), up.ID, digest); !errors.As(err, &ve) || ve.Field != "size" {
		t.Errorf("finish of an incomplete upload: %v, want a ValidationError on size", err)
	}
}

type refs map[string][]string

func (r refs) ReferencesTo(_ context.Context, digest string) ([]string, error) { return r[digest], nil }

func TestListFiltersPagesAndReferences(t *testing.T) {
	db := newDB(t)
	data, digest := testutil.RandomContent(100, 7)
	s := open(t, db, artifacts.Options{References: refs{digest: {"Release/fleet/r1"}}})
	for i, l := range []map[string]string{
		{"edgefleet.io/channel": "stable", "tier": "base"},
		{"edgefleet.io/channel": "beta"},
		{"tier": "base"},
	} {
		sp := spec(fmt.Sprintf("pkg-%d", i), "1")
		sp.Labels = l
		up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: sp}, "x")
		if err != nil {
			t.Fatal(err)
		}
		d, dd := data, digest
		if i > 0 {
			d, dd = testutil.RandomContent(100+i, uint64(10+i))
		}
		if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(d)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finish(t.Context(), up.ID, dd); err != nil {
			t.Fatal(err)
		}
	}
	for sel, want := range map[string][]string{
		"edgefleet.io/channel=stable":           {"pkg-0"},
		"edgefleet.io/channel in (stable,beta)": {"pkg-0", "pkg-1"},
		"edgefleet.io/channel!=stable":          {"pkg-1", "pkg-2"},
		"tier":                                  {"pkg-0", "pkg-2"},
		"!tier":                                 {"pkg-1"},
		"tier=base,edgefleet.io/channel":        {"pkg-0"},
	} {
		ls, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.List(t.Context(), artifacts.Filter{Labels: ls}, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range list.Items {
			names = append(names, a.Name)
		}
		if fmt.Sprint(sortStrings(names)) != fmt.Sprint(want) {
			t.Errorf("selector %q: %v, want %v", sel, names, want)
		}
	}
	// Pages of one.
	var seen []string
	cont := ""
	for {
		list, err := s.List(t.Context(), artifacts.Filter{}, 1, cont)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range list.Items {
			seen = append(seen, a.Name)
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Errorf("paging saw %v", seen)
	}
	// pkg-0's content is referenced by a release.
	list, _ := s.List(t.Context(), artifacts.Filter{Name: "pkg-0"}, 1, "")
	var re *artifacts.ReferencedError
	if err := s.Delete(t.Context(), list.Items[0].ID); !errors.As(err, &re) || re.By[0] != "Release/fleet/r1" {
		t.Errorf("delete of a referenced artifact: %v", err)
	}
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func TestExpireUploads(t *testing.T) {
	db := newDB(t)
	clk := clocktesting.NewFakeClock(time.Now())
	s := open(t, db, artifacts.Options{Clock: clk, UploadTTL: time.Hour})
	data, _ := testutil.RandomContent(200_000, 8)
	old, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("old", "1")}, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), old.ID, 0, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	clk.Step(50 * time.Minute)
	fresh, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec("fresh", "1")}, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), fresh.ID, 0, bytes.NewReader(data[:1000])); err != nil {
		t.Fatal(err)
	}
	clk.Step(20 * time.Minute)
	listed, err := s.ListUploads(t.Context(), 10)
	if err != nil || len(listed) != 1 || listed[0].ID != fresh.ID || listed[0].Offset != 1000 || listed[0].Artifact.Name != "fresh" {
		t.Errorf("ListUploads = %+v, %v; want the fresh session alone at offset 1000", listed, err)
	}
	n, err := s.ExpireUploads(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("ExpireUploads = %d, %v; want 1", n, err)
	}
	if _, err := s.GetUpload(t.Context(), old.ID); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("expired upload still there: %v", err)
	}
	if _, err := s.GetUpload(t.Context(), fresh.ID); err != nil {
		t.Errorf("fresh upload gone: %v", err)
	}
	if c := count(t, db, "blobs.chunks"); c != 0 {
		t.Errorf("%d chunks of the expired upload left", c)
	}
}

// TestBinaryPackageContentChecked: Finish refuses a binary-package whose bytes are not a package
// (pkg/packages) or whose manifest names another name, version or architecture, with a
// ValidationError of field content, and stores nothing; a package of architecture "all" fits
// any; bytes stored already for an artifact of another kind stay when the package is refused.
func TestBinaryPackageContentChecked(t *testing.T) {
	db := newDB(t)
	s := open(t, db, artifacts.Options{})
	standIn := func(name, version, arch string, seed uint64) []byte {
		t.Helper()
		data, _, err := builders.StandInPackage(name, version, arch, 2000, seed)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	put := func(spec restv1.ArtifactSpec, data []byte) error {
		t.Helper()
		up, err := s.CreateUpload(t.Context(), restv1.CreateUpload{ArtifactSpec: spec}, "test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(t.Context(), up.ID, 0, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		_, err = s.Finish(t.Context(), up.ID, digestOf(data))
		return err
	}
	pkg := func(name, version, arch string) restv1.ArtifactSpec {
		return restv1.ArtifactSpec{Kind: restv1.KindBinaryPackage, Name: name, Version: version, Architecture: arch}
	}
	junk, _ := testutil.RandomContent(300_000, 51)
	for _, tt := range []struct {
		name string
		spec restv1.ArtifactSpec
		data []byte
		want string
	}{
		{"random bytes", pkg("junk", "1", "amd64"), junk, "not a binary package (docs/packages.md): package: not gzip-compressed"},
		{"another name", pkg("kubelet", "1", "amd64"), standIn("containerd", "1", "amd64", 52), `names package "containerd", the artifact "kubelet"`},
		{"another version", pkg("kubelet", "2", "amd64"), standIn("kubelet", "1", "amd64", 53), `says version "1", the artifact "2"`},
		{"another architecture", pkg("kubelet", "1", "amd64"), standIn("kubelet", "1", "arm64", 54), `says architecture "arm64", the artifact "amd64"`},
		{"a specific architecture as noarch", pkg("kubelet", "1", "noarch"), standIn("kubelet", "1", "amd64", 55), `says architecture "amd64", the artifact "noarch"`},
	} {
		err := put(tt.spec, tt.data)
		var ve *artifacts.ValidationError
		if !errors.As(err, &ve) || ve.Field != "content" || !strings.Contains(ve.Message, tt.want) {
			t.Errorf("%s: Finish = %v, want a ValidationError of content saying %q", tt.name, err, tt.want)
		}
		for _, coll := range []string{"artifacts", "uploads", "blobs.files", "blobs.chunks"} {
			if n := count(t, db, coll); n != 0 {
				t.Errorf("%s: %s has %d documents after the refusal", tt.name, coll, n)
			}
		}
	}

	if err := put(pkg("kubelet", "1", "amd64"), standIn("kubelet", "1", "amd64", 56)); err != nil {
		t.Errorf("a valid package: %v", err)
	}
	if err := put(pkg("edge-hello", "1", "amd64"), standIn("edge-hello", "1", "all", 57)); err != nil {
		t.Errorf("a package for all architectures as amd64: %v", err)
	}
	// The same random bytes as an OS image (whose content the store does not read), then as a
	// package: refused, and the image's blob stays.
	image := restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "edge-os", Version: "1", Architecture: "amd64"}
	if err := put(image, junk); err != nil {
		t.Fatal(err)
	}
	if err := put(pkg("junk", "1", "amd64"), junk); err == nil {
		t.Errorf("random bytes stored as an OS image were then taken as a package")
	}
	if got := read(t, s, digestOf(junk), 0, int64(len(junk))); !bytes.Equal(got, junk) {
		t.Errorf("the OS image's bytes changed after the refused package")
	}
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestKindsOfAndManifest: KindsOf lists the kinds of the artifacts of a content, each once, and
// none for content the store lacks; Manifest reads a stored package's manifest alone — also of a
// package many chunks long —, wraps ErrNotFound for content the store lacks, and is a
// ValidationError of content for content that is no package.
func TestKindsOfAndManifest(t *testing.T) {
	s := open(t, newDB(t), artifacts.Options{})
	data, digest, err := builders.StandInPackage("kubelet", "1.36.3", "amd64", 3*artifacts.ChunkSize, 61)
	if err != nil {
		t.Fatal(err)
	}
	builders.PutArtifact(t, s, restv1.ArtifactSpec{Kind: restv1.KindBinaryPackage, Name: "kubelet", Version: "1.36.3", Architecture: "amd64"}, data)
	for _, v := range []string{"1", "2"} {
		builders.PutArtifact(t, s, restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "kubelet-as-image", Version: v, Architecture: "amd64"}, data)
	}
	kinds, err := s.KindsOf(t.Context(), digest)
	if err != nil || !slices.Equal(kinds, []restv1.ArtifactKind{restv1.KindBinaryPackage, restv1.KindOSImage}) {
		t.Errorf("KindsOf = %v, %v; want binary-package and os-image, once each", kinds, err)
	}
	other := strings.Repeat("0", 64)
	if kinds, err := s.KindsOf(t.Context(), other); err != nil || len(kinds) != 0 {
		t.Errorf("KindsOf of content the store lacks = %v, %v; want none", kinds, err)
	}
	m, err := s.Manifest(t.Context(), digest)
	if err != nil || m.Name != "kubelet" || m.Version != "1.36.3" || len(m.Files) != 1 {
		t.Errorf("Manifest = %+v, %v; want kubelet 1.36.3 with its payload file", m, err)
	}
	if _, err := s.Manifest(t.Context(), other); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("Manifest of content the store lacks: %v, want ErrNotFound", err)
	}
	junk, junkDigest := testutil.RandomContent(1000, 62)
	builders.PutArtifact(t, s, restv1.ArtifactSpec{Kind: restv1.KindOSImage, Name: "junk", Version: "1", Architecture: "amd64"}, junk)
	var invalid *artifacts.ValidationError
	if _, err := s.Manifest(t.Context(), junkDigest); !errors.As(err, &invalid) || invalid.Field != "content" || !strings.Contains(invalid.Message, "not a binary package (docs/packages.md): package: not gzip-compressed") {
		t.Errorf("Manifest of content that is no package: %v, want a ValidationError of content", err)
	}
}
