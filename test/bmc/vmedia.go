package bmc

// Virtual media: each System whose machine has a CD-ROM drive the BMC can fill (a
// MediaMachine) has a VirtualMedia collection with one member, Cd (MediaTypes CD and DVD).
// InsertMedia downloads the image its Image names into the machine's directory and puts it
// into the drive; EjectMedia takes it out and deletes the file.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// MediaMachine is a Machine with a CD-ROM drive the BMC's virtual media fills.
type MediaMachine interface {
	Machine
	// MediaDir is a directory of the machine's where the BMC keeps the images it downloads.
	MediaDir() string
	// InsertMedia puts the image file at path into the CD-ROM drive: a running machine's at
	// once, an off one's at its next power-on.
	InsertMedia(path string) error
	// EjectMedia empties the drive.
	EjectMedia() error
}

const (
	mediaID       = "Cd"
	mediaFileName = "virtual-media-cd.iso"
)

// The defaults of Options.MediaMaxSize and Options.MediaTimeout.
const (
	defaultMediaMaxSize = 2 << 30
	defaultMediaTimeout = 5 * time.Minute
)

// virtualMedia is a System's virtual CD drive. mu serializes insertions and ejections (a
// download may take a while, and it must not hold the System's lock); the state is read
// under it too.
type virtualMedia struct {
	machine MediaMachine

	mu       sync.Mutex
	image    string // the URL inserted; "" when the drive is empty
	inserted bool
}

func mediaCollectionPath(id string) string { return systemPath(id) + "/VirtualMedia" }
func mediaPath(id string) string           { return mediaCollectionPath(id) + "/" + mediaID }

// virtualMediaDoc is the Cd resource of a System.
func virtualMediaDoc(sys *system) doc {
	vm := sys.media
	vm.mu.Lock()
	image, inserted := vm.image, vm.inserted
	vm.mu.Unlock()
	path := mediaPath(sys.id)
	d := doc{
		"@odata.type":    "#VirtualMedia.v1_3_0.VirtualMedia",
		"@odata.id":      path,
		"Id":             mediaID,
		"Name":           "Virtual CD",
		"MediaTypes":     []string{"CD", "DVD"},
		"Inserted":       inserted,
		"WriteProtected": true,
		"Image":          nil,
		"ImageName":      nil,
		"ConnectedVia":   "NotConnected",
		"TransferMethod": "Upload",
		"Status":         doc{"State": "Enabled", "Health": "OK"},
		"Actions": doc{
			"#VirtualMedia.InsertMedia": doc{"target": path + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  doc{"target": path + "/Actions/VirtualMedia.EjectMedia"},
		},
	}
	if inserted {
		d["Image"] = image
		d["ImageName"] = imageName(image)
		d["ConnectedVia"] = "URI"
	}
	return d
}

func imageName(image string) string {
	u, err := url.Parse(image)
	if err != nil {
		return ""
	}
	return filepath.Base(u.Path)
}

// routeMedia answers /redfish/v1/Systems/{id}/VirtualMedia[/Cd[/Actions/...]] (seg starts at
// "VirtualMedia").
func (s *Server) routeMedia(w http.ResponseWriter, r *http.Request, sys *system, seg []string) bool {
	if sys.media == nil || len(seg) == 0 || seg[0] != "VirtualMedia" {
		return false
	}
	switch {
	case len(seg) == 1:
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, collection("#VirtualMediaCollection.VirtualMediaCollection", "Virtual Media Collection", mediaCollectionPath(sys.id), []string{mediaPath(sys.id)}))
		}
	case len(seg) == 2 && seg[1] == mediaID:
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, virtualMediaDoc(sys))
		}
	case len(seg) == 4 && seg[1] == mediaID && seg[2] == "Actions" && seg[3] == "VirtualMedia.InsertMedia":
		if methods(w, r, http.MethodPost) {
			s.serveInsertMedia(w, r, sys)
		}
	case len(seg) == 4 && seg[1] == mediaID && seg[2] == "Actions" && seg[3] == "VirtualMedia.EjectMedia":
		if methods(w, r, http.MethodPost) {
			s.serveEjectMedia(w, r, sys)
		}
	default:
		return false
	}
	return true
}

// insertRequest is a validated #VirtualMedia.InsertMedia.
type insertRequest struct {
	image *url.URL
}

// parseInsertMedia validates the body of a #VirtualMedia.InsertMedia: Image (an http or https
// URL of a loopback host) is required; Inserted and WriteProtected may only be true (a CD is
// read-only, and inserting is what the action does); TransferProtocolType must match the URL's
// scheme; TransferMethod may be Upload (the BMC copies the image) or Stream (taken as Upload).
// Credentials are refused: the test's image servers have none.
func parseInsertMedia(body []byte) (insertRequest, *apiError) {
	var req insertRequest
	var params map[string]json.RawMessage
	if err := strictUnmarshal(body, &params); err != nil || params == nil {
		return req, errorf(http.StatusBadRequest, "MalformedJSON", fmt.Sprintf("the body is not a JSON object: %v", errOrNull(err)))
	}
	raw, ok := params["Image"]
	if !ok {
		return req, errorf(http.StatusBadRequest, "ActionParameterMissing", "#VirtualMedia.InsertMedia needs Image, the URL of the ISO image", pointer("Image"))
	}
	var image string
	if err := json.Unmarshal(raw, &image); err != nil || image == "" {
		return req, errorf(http.StatusBadRequest, "ActionParameterValueTypeError", fmt.Sprintf("Image must be a URL string, not %s", raw), pointer("Image"))
	}
	u, err := url.Parse(image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return req, errorf(http.StatusBadRequest, "ActionParameterValueFormatError", fmt.Sprintf("Image %q is not an http:// or https:// URL", image), pointer("Image"))
	}
	if !loopbackHost(u.Hostname()) {
		return req, errorf(http.StatusBadRequest, "ActionParameterValueError", fmt.Sprintf("Image %q: this test BMC downloads only from the loopback (127.0.0.0/8, ::1, localhost), not %s", image, u.Hostname()), pointer("Image"))
	}
	req.image = u
	for _, name := range sortedKeys(params) {
		v := params[name]
		switch name {
		case "Image":
		case "Inserted", "WriteProtected":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return req, errorf(http.StatusBadRequest, "ActionParameterValueTypeError", fmt.Sprintf("%s must be a boolean, not %s", name, v), pointer(name))
			}
			if !b {
				return req, errorf(http.StatusBadRequest, "ActionParameterValueError", fmt.Sprintf("%s: false is not supported (a virtual CD is inserted by this action and is read-only)", name), pointer(name))
			}
		case "TransferProtocolType":
			var p string
			if err := json.Unmarshal(v, &p); err != nil || !strings.EqualFold(p, u.Scheme) {
				return req, errorf(http.StatusBadRequest, "ActionParameterValueError", fmt.Sprintf("TransferProtocolType %s does not match Image's scheme %s", v, u.Scheme), pointer(name))
			}
		case "TransferMethod":
			var m string
			if err := json.Unmarshal(v, &m); err != nil || (m != "Upload" && m != "Stream") {
				return req, errorf(http.StatusBadRequest, "ActionParameterValueNotInList", fmt.Sprintf("TransferMethod %s is not one of [Upload Stream]", v), pointer(name))
			}
		case "UserName", "Password":
			return req, errorf(http.StatusBadRequest, "ActionParameterNotSupported", fmt.Sprintf("%s is not supported: this test BMC fetches images without credentials", name), pointer(name))
		default:
			return req, errorf(http.StatusBadRequest, "ActionParameterUnknown",
				fmt.Sprintf("#VirtualMedia.InsertMedia has no parameter %s (Image, Inserted, WriteProtected, TransferProtocolType, TransferMethod)", name), pointer(name))
		}
	}
	return req, nil
}

func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveInsertMedia downloads the image into the machine's directory and inserts it: 204 once
// the drive holds it.
func (s *Server) serveInsertMedia(w http.ResponseWriter, r *http.Request, sys *system) {
	req, ok := readRequest(w, r, parseInsertMedia)
	if !ok {
		return
	}
	vm := sys.media
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if vm.inserted {
		writeError(w, errorf(http.StatusBadRequest, "ActionParameterValueConflict",
			fmt.Sprintf("virtual media %s of system %s holds %s: eject it first", mediaID, sys.id, vm.image), pointer("Image")))
		return
	}
	path, err := s.download(r.Context(), req.image, vm.machine.MediaDir())
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "ActionParameterValueError", fmt.Sprintf("Image %s: %v", req.image, err), pointer("Image")))
		return
	}
	if err := vm.machine.InsertMedia(path); err != nil {
		_ = os.Remove(path)
		writeError(w, errorf(http.StatusInternalServerError, "InternalError", fmt.Sprintf("system %s: insert %s: %v", sys.id, req.image, err)))
		return
	}
	vm.image, vm.inserted = req.image.String(), true
	s.opts.Logf("bmc: system %s: virtual media %s holds %s", sys.id, mediaID, req.image)
	w.WriteHeader(http.StatusNoContent)
}

// serveEjectMedia empties the drive and deletes the image: 204 (also when it was empty). The
// body may be empty or {} (sushy sends either).
func (s *Server) serveEjectMedia(w http.ResponseWriter, r *http.Request, sys *system) {
	body, apiErr := readBody(r)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		var params map[string]json.RawMessage
		if err := strictUnmarshal(body, &params); err != nil || params == nil {
			writeError(w, errorf(http.StatusBadRequest, "MalformedJSON", fmt.Sprintf("the body is not a JSON object: %v", errOrNull(err))))
			return
		}
		for _, name := range sortedKeys(params) {
			writeError(w, errorf(http.StatusBadRequest, "ActionParameterUnknown", fmt.Sprintf("#VirtualMedia.EjectMedia has no parameters, not %s", name), pointer(name)))
			return
		}
	}
	vm := sys.media
	vm.mu.Lock()
	defer vm.mu.Unlock()
	if err := vm.machine.EjectMedia(); err != nil {
		writeError(w, errorf(http.StatusInternalServerError, "InternalError", fmt.Sprintf("system %s: eject: %v", sys.id, err)))
		return
	}
	if err := os.Remove(filepath.Join(vm.machine.MediaDir(), mediaFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.opts.Logf("bmc: system %s: eject: %v", sys.id, err)
	}
	vm.image, vm.inserted = "", false
	w.WriteHeader(http.StatusNoContent)
}

// download fetches u into dir/virtual-media-cd.iso (through a temporary file, renamed once
// complete), refusing an image larger than Options.MediaMaxSize or slower than
// Options.MediaTimeout.
func (s *Server) download(ctx context.Context, u *url.URL, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.MediaTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := s.mediaClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download: %s", resp.Status)
	}
	max := s.opts.MediaMaxSize
	if resp.ContentLength > max {
		return "", fmt.Errorf("download: %d bytes, larger than the limit of %d", resp.ContentLength, max)
	}
	tmp, err := os.CreateTemp(dir, mediaFileName+".*.tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, max+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("download after %d bytes: %w", n, err)
	}
	if n > max {
		return "", fmt.Errorf("download: larger than the limit of %d bytes", max)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return "", fmt.Errorf("download: %d bytes of %d", n, resp.ContentLength)
	}
	path := filepath.Join(dir, mediaFileName)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}
