package bmc_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/bmc"
)

// fakeMediaMachine is a fakeMachine with a CD-ROM drive of memory: it records the image files
// the BMC inserts and reads them while they are inserted.
type fakeMediaMachine struct {
	fakeMachine
	dir   string
	media string // the path inserted
	bytes []byte // its content when it was inserted
}

func (f *fakeMediaMachine) MediaDir() string { return f.dir }

func (f *fakeMediaMachine) InsertMedia(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f.media, f.bytes = path, b
	return f.record("InsertMedia(" + filepath.Base(path) + ")")
}

func (f *fakeMediaMachine) EjectMedia() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.media, f.bytes = "", nil
	return f.record("EjectMedia")
}

// newMediaBed is a bed whose system "sys-0" is a fakeMediaMachine, and an image server on the
// loopback serving image at /boot.iso (after delay).
func newMediaBed(t *testing.T, opts bmc.Options, image []byte, delay time.Duration) (*bed, *fakeMediaMachine, string) {
	t.Helper()
	srv := bmc.StartT(t, opts)
	m := &fakeMediaMachine{dir: t.TempDir()}
	if _, err := srv.AddSystem("sys-0", m); err != nil {
		t.Fatal(err)
	}
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/boot.iso" {
			http.NotFound(w, r)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		if r.URL.Query().Has("chunked") {
			// No Content-Length: the size shows only while reading.
			_, _ = w.Write(image[:len(image)/2])
			w.(http.Flusher).Flush()
			_, _ = w.Write(image[len(image)/2:])
			return
		}
		_, _ = w.Write(image)
	}))
	t.Cleanup(images.Close)
	return &bed{t: t, srv: srv, m: &m.fakeMachine}, m, images.URL
}

const (
	cdPath     = "/redfish/v1/Systems/sys-0/VirtualMedia/Cd"
	insertPath = cdPath + "/Actions/VirtualMedia.InsertMedia"
	ejectPath  = cdPath + "/Actions/VirtualMedia.EjectMedia"
)

// TestVirtualMedia walks the way Ironic's redfish-virtual-media boot goes: the System's link to
// its virtual media, the Cd, an insertion that downloads the image and puts it in the drive, a
// second insertion refused, an ejection that empties the drive and deletes the file.
func TestVirtualMedia(t *testing.T) {
	image := bytes.Repeat([]byte("edgefleet-iso "), 1000)
	b, m, images := newMediaBed(t, bmc.Options{}, image, 0)

	if got := get(b.system(), "VirtualMedia/@odata.id"); got != "/redfish/v1/Systems/sys-0/VirtualMedia" {
		t.Fatalf("System VirtualMedia = %v, want the link /redfish/v1/Systems/sys-0/VirtualMedia", got)
	}
	coll := b.must(http.MethodGet, "/redfish/v1/Systems/sys-0/VirtualMedia", "", http.StatusOK)
	b.wantProps(coll, map[string]any{"Members@odata.count": 1})
	if got := fmt.Sprint(get(coll, "Members")); got != "[map[@odata.id:"+cdPath+"]]" {
		t.Errorf("Members = %s, want the Cd", got)
	}
	cd := b.must(http.MethodGet, cdPath, "", http.StatusOK)
	b.wantProps(cd, map[string]any{"Id": "Cd", "MediaTypes": "[CD DVD]", "Inserted": false, "Image": "<nil>",
		"Actions/#VirtualMedia.InsertMedia/target": insertPath, "Actions/#VirtualMedia.EjectMedia/target": ejectPath})

	// sushy's body: Image only (Inserted and WriteProtected left at their defaults).
	url := images + "/boot.iso"
	b.must(http.MethodPost, insertPath, `{"Image":"`+url+`"}`, http.StatusNoContent)
	b.wantCalls("InsertMedia(virtual-media-cd.iso)")
	if m.media != filepath.Join(m.dir, "virtual-media-cd.iso") || !bytes.Equal(m.bytes, image) {
		t.Errorf("drive holds %s (%d bytes), want %s/virtual-media-cd.iso with the %d bytes served", m.media, len(m.bytes), m.dir, len(image))
	}
	b.wantProps(b.must(http.MethodGet, cdPath, "", http.StatusOK), map[string]any{"Inserted": true, "Image": url, "ImageName": "boot.iso", "ConnectedVia": "URI"})

	status, out := b.do(http.MethodPost, insertPath, `{"Image":"`+url+`","Inserted":true,"WriteProtected":true}`, true)
	if status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(get(out, "error/message")), "eject it first") {
		t.Errorf("second insert: %d %v, want 400 saying to eject first", status, out)
	}
	b.wantCalls()

	// sushy posts the ejection with no body, and retries with {}.
	b.must(http.MethodPost, ejectPath, "", http.StatusNoContent)
	b.must(http.MethodPost, ejectPath, "{}", http.StatusNoContent)
	b.wantCalls("EjectMedia", "EjectMedia")
	if _, err := os.Stat(filepath.Join(m.dir, "virtual-media-cd.iso")); !os.IsNotExist(err) {
		t.Errorf("the image file outlived the ejection: %v", err)
	}
	b.wantProps(b.must(http.MethodGet, cdPath, "", http.StatusOK), map[string]any{"Inserted": false, "Image": "<nil>"})

	// With TransferProtocolType and TransferMethod, as sushy retries when a BMC wants them.
	b.must(http.MethodPost, insertPath, `{"Image":"`+url+`","TransferProtocolType":"HTTP","TransferMethod":"Stream"}`, http.StatusNoContent)
	b.wantCalls("InsertMedia(virtual-media-cd.iso)")
}

// TestVirtualMediaBadRequests: each bad body is a 400 naming its property, and changes nothing.
func TestVirtualMediaBadRequests(t *testing.T) {
	b, m, images := newMediaBed(t, bmc.Options{}, []byte("iso"), 0)
	url := images + "/boot.iso"
	for _, tc := range []struct {
		name, body, wantInMsg string
	}{
		{"not JSON", `Image=x`, "JSON"},
		{"no Image", `{}`, "Image"},
		{"Image not a string", `{"Image":1}`, "Image"},
		{"Image not http", `{"Image":"ftp://127.0.0.1/boot.iso"}`, "Image"},
		{"Image off the loopback", `{"Image":"http://192.0.2.1/boot.iso"}`, "Image \"http://192.0.2.1/boot.iso\": this test BMC downloads only from the loopback"},
		{"Image not found", `{"Image":"` + images + `/none.iso"}`, "Image"},
		{"Image unreachable", `{"Image":"http://127.0.0.1:1/boot.iso"}`, "Image"},
		{"Inserted false", `{"Image":"` + url + `","Inserted":false}`, "Inserted"},
		{"WriteProtected not a bool", `{"Image":"` + url + `","WriteProtected":"yes"}`, "WriteProtected"},
		{"protocol mismatch", `{"Image":"` + url + `","TransferProtocolType":"HTTPS"}`, "TransferProtocolType"},
		{"method unknown", `{"Image":"` + url + `","TransferMethod":"Carrier pigeon"}`, "TransferMethod"},
		{"credentials", `{"Image":"` + url + `","UserName":"u"}`, "UserName"},
		{"unknown parameter", `{"Image":"` + url + `","Slot":2}`, "Slot"},
	} {
		status, out := b.do(http.MethodPost, insertPath, tc.body, true)
		if status != http.StatusBadRequest {
			t.Errorf("%s: POST %s: %d, want 400: %v", tc.name, tc.body, status, out)
			continue
		}
		if msg := fmt.Sprint(get(out, "error/message")); !strings.Contains(msg, tc.wantInMsg) {
			t.Errorf("%s: message %q does not name %s", tc.name, msg, tc.wantInMsg)
		}
	}
	status, out := b.do(http.MethodPost, ejectPath, `{"Image":"x"}`, true)
	if status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(get(out, "error/message")), "Image") {
		t.Errorf("eject with a parameter: %d %v, want 400 naming it", status, out)
	}
	b.wantCalls()
	if entries, _ := os.ReadDir(m.dir); len(entries) != 0 {
		t.Errorf("bad requests left files in the machine's directory: %v", entries)
	}
	b.wantProps(b.must(http.MethodGet, cdPath, "", http.StatusOK), map[string]any{"Inserted": false})
}

// TestVirtualMediaLimits: an image over the size limit, or slower than the deadline, is refused
// and leaves no file.
func TestVirtualMediaLimits(t *testing.T) {
	for _, query := range []string{"", "?chunked"} {
		t.Run("size"+query, func(t *testing.T) {
			b, m, images := newMediaBed(t, bmc.Options{MediaMaxSize: 100}, make([]byte, 101), 0)
			status, out := b.do(http.MethodPost, insertPath, `{"Image":"`+images+`/boot.iso`+query+`"}`, true)
			if msg := fmt.Sprint(get(out, "error/message")); status != http.StatusBadRequest || !strings.Contains(msg, "Image") || !strings.Contains(msg, "limit of 100") {
				t.Errorf("101-byte image with a 100-byte limit: %d %q, want 400 naming Image and the limit", status, msg)
			}
			b.wantCalls()
			if entries, _ := os.ReadDir(m.dir); len(entries) != 0 {
				t.Errorf("left %v", entries)
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		b, m, images := newMediaBed(t, bmc.Options{MediaTimeout: 200 * time.Millisecond}, []byte("iso"), 5*time.Second)
		start := time.Now()
		status, out := b.do(http.MethodPost, insertPath, `{"Image":"`+images+`/boot.iso"}`, true)
		if msg := fmt.Sprint(get(out, "error/message")); status != http.StatusBadRequest || !strings.Contains(msg, "Image") || !strings.Contains(msg, "deadline") {
			t.Errorf("slow image: %d %q, want 400 naming Image and the deadline", status, msg)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("the refusal took %s, want about the 200 ms deadline", d)
		}
		b.wantCalls()
		if entries, _ := os.ReadDir(m.dir); len(entries) != 0 {
			t.Errorf("left %v", entries)
		}
	})
}

// TestNoVirtualMediaWithoutDrive: a machine the BMC cannot put media into has none.
func TestNoVirtualMediaWithoutDrive(t *testing.T) {
	b := newBed(t, bmc.Options{})
	if got := get(b.system(), "VirtualMedia"); got != nil {
		t.Errorf("System VirtualMedia = %v, want none", got)
	}
	b.must(http.MethodGet, "/redfish/v1/Systems/sys-0/VirtualMedia", "", http.StatusNotFound)
	b.must(http.MethodPost, insertPath, `{"Image":"http://127.0.0.1/x.iso"}`, http.StatusNotFound)
}
