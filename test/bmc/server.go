package bmc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure a Server.
type Options struct {
	// Addr is the address to listen on; 127.0.0.1:0 (a free port of the loopback) when empty.
	Addr string
	// User and Password are the HTTP basic credentials the service takes; made at random for
	// the server when empty (read them from the Server). They live in memory only.
	User, Password string
	// Mode is the boot mode (firmware) systems start with; ModeLegacy (SeaBIOS) when empty.
	Mode Mode
	// GracefulTimeout bounds how long a GracefulRestart waits for the OS to power the machine
	// off before it powers it on again; 2 minutes when zero.
	GracefulTimeout time.Duration
	// RequestLogSize is how many requests Requests keeps; 1,000 when zero.
	RequestLogSize int
	// Logf, when set, also gets each request and the server's own troubles (t.Logf).
	Logf func(format string, args ...any)
	// MediaMaxSize bounds the images virtual media downloads; 2 GiB when zero.
	MediaMaxSize int64
	// MediaTimeout bounds each download of virtual media; 5 minutes when zero.
	MediaTimeout time.Duration
}

// Server is a Redfish service (a BMC) for machines: one System, and one Chassis, per machine
// and one Manager for them all, behind HTTP basic authentication.
type Server struct {
	// URL is the service's address, http://HOST:PORT (Ironic's redfish_address).
	URL string
	// User and Password are the credentials the service takes.
	User, Password string

	opts   Options
	uuid   string
	srv    *http.Server
	ctx    context.Context // ends with the server: pending GracefulRestarts give up
	cancel context.CancelFunc
	log    *requestLog

	// mediaClient downloads virtual media: no proxy (the images are on the loopback).
	mediaClient *http.Client

	mu      sync.Mutex
	systems map[string]*system
	order   []string
}

// Start starts a Redfish service with no systems yet (AddSystem adds them).
func Start(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Mode == "" {
		opts.Mode = ModeLegacy
	}
	if !slices.Contains(modes, opts.Mode) {
		return nil, fmt.Errorf("bmc: Options.Mode %q: want one of %v", opts.Mode, modes)
	}
	if opts.GracefulTimeout == 0 {
		opts.GracefulTimeout = 2 * time.Minute
	}
	if opts.RequestLogSize == 0 {
		opts.RequestLogSize = 1000
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.MediaMaxSize == 0 {
		opts.MediaMaxSize = defaultMediaMaxSize
	}
	if opts.MediaTimeout == 0 {
		opts.MediaTimeout = defaultMediaTimeout
	}
	s := &Server{User: opts.User, Password: opts.Password, opts: opts, systems: map[string]*system{},
		log:         &requestLog{size: opts.RequestLogSize},
		mediaClient: &http.Client{Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: time.Minute}}}
	var err error
	if s.User == "" {
		if s.User, err = randomHex("bmc-", 4); err != nil {
			return nil, err
		}
	}
	if s.Password == "" {
		if s.Password, err = randomHex("", 24); err != nil {
			return nil, err
		}
	}
	if s.uuid, err = randomUUID(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("bmc: listen on %s: %w", opts.Addr, err)
	}
	s.URL = "http://" + ln.Addr().String()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logf("bmc: serve %s: %v", s.URL, err)
		}
	}()
	return s, nil
}

// StartT starts a service for a test and closes it in the test's cleanup; when the test
// failed, the cleanup logs the requests the service answered.
func StartT(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("requests to the BMC at %s:\n%s", s.URL, s.log)
		}
		if err := s.Close(); err != nil {
			t.Errorf("close BMC: %v", err)
		}
	})
	return s
}

var systemID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// AddSystem adds a machine as System id and returns the System's path
// (/redfish/v1/Systems/ID: Ironic's redfish_system_id). The machine is not powered on or off.
// A MediaMachine (a VM) gets virtual media: /redfish/v1/Systems/ID/VirtualMedia/Cd.
func (s *Server) AddSystem(id string, m Machine) (string, error) {
	if !systemID.MatchString(id) {
		return "", fmt.Errorf("bmc: system id %q: want letters, digits, '.', '_', '-'", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.systems[id]; ok {
		return "", fmt.Errorf("bmc: system %s exists", id)
	}
	s.systems[id] = newSystem(id, m, s.opts.Mode, s.opts.GracefulTimeout, s.opts.Logf)
	s.order = append(s.order, id)
	return systemPath(id), nil
}

func (s *Server) system(id string) *system {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.systems[id]
}

func (s *Server) systemIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order...)
}

// Requests are the latest requests the service answered, oldest first.
func (s *Server) Requests() []Request { return s.log.list() }

// RequestLog is Requests as text, one request a line.
func (s *Server) RequestLog() string { return s.log.String() }

// Close stops the service (waiting up to 10 s for requests in flight). The machines stay as
// they are: power them off yourself.
func (s *Server) Close() error {
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// ServeHTTP authenticates, routes and logs a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	user := s.serve(sw, r)
	req := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Status: sw.status, User: user, Agent: r.UserAgent()}
	s.log.add(req)
	s.opts.Logf("bmc: %s", req)
}

// serve answers r and returns the user it authenticated as ("" when none).
func (s *Server) serve(w http.ResponseWriter, r *http.Request) string {
	path := r.URL.Path
	if path != "/" {
		path = strings.TrimSuffix(path, "/")
	}
	if path == "/redfish" {
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, doc{"v1": root + "/"})
		}
		return ""
	}
	rest, ok := strings.CutPrefix(path, root)
	if !ok || rest != "" && !strings.HasPrefix(rest, "/") {
		writeError(w, errorf(http.StatusNotFound, "ResourceNotFound", fmt.Sprintf("%s is not a Redfish resource here (the service is at %s/)", r.URL.Path, root)))
		return ""
	}
	seg := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	// The service root is public (Redfish: clients read it before they authenticate); so is
	// the session service's login, which this service does not have.
	switch rest {
	case "":
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, s.serviceRoot())
		}
		return ""
	case "/SessionService/Sessions", "/SessionService":
		writeError(w, errorf(http.StatusNotFound, "ResourceNotFound", "this BMC has no SessionService: use HTTP basic authentication"))
		return ""
	}
	user, ok := s.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="edgefleet test BMC"`)
		writeError(w, errorf(http.StatusUnauthorized, "InsufficientPrivilege", "authentication required: the credentials are missing or wrong"))
		return ""
	}
	s.route(w, r, seg)
	return user
}

// authenticate checks r's HTTP basic credentials, in constant time.
func (s *Server) authenticate(r *http.Request) (string, bool) {
	user, password, ok := r.BasicAuth()
	if !ok {
		return "", false
	}
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(s.User))
	passwordOK := subtle.ConstantTimeCompare([]byte(password), []byte(s.Password))
	if userOK&passwordOK != 1 {
		return "", false
	}
	return user, true
}

// route answers an authenticated request for /redfish/v1/<seg...>.
func (s *Server) route(w http.ResponseWriter, r *http.Request, seg []string) {
	notFound := func() {
		writeError(w, errorf(http.StatusNotFound, "ResourceNotFound", fmt.Sprintf("no resource %s on this BMC", r.URL.Path)))
	}
	switch {
	case len(seg) == 1 && seg[0] == "Systems":
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, collection("#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection", root+"/Systems", s.systemPaths(systemPath)))
		}
	case len(seg) >= 2 && seg[0] == "Systems":
		sys := s.system(seg[1])
		if sys == nil {
			notFound()
			return
		}
		switch {
		case len(seg) == 2:
			if methods(w, r, http.MethodGet, http.MethodPatch) {
				s.serveSystem(w, r, sys)
			}
		case len(seg) == 4 && seg[2] == "Actions" && seg[3] == "ComputerSystem.Reset":
			if methods(w, r, http.MethodPost) {
				s.serveReset(w, r, sys)
			}
		case s.routeMedia(w, r, sys, seg[2:]):
		default:
			notFound()
		}
	case len(seg) == 1 && seg[0] == "Managers":
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, collection("#ManagerCollection.ManagerCollection", "Manager Collection", root+"/Managers", []string{managerPath}))
		}
	case len(seg) == 2 && seg[0] == "Managers" && seg[1] == managerID:
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, s.manager())
		}
	case len(seg) == 1 && seg[0] == "Chassis":
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, collection("#ChassisCollection.ChassisCollection", "Chassis Collection", root+"/Chassis", s.systemPaths(chassisPath)))
		}
	case len(seg) == 2 && seg[0] == "Chassis" && s.system(seg[1]) != nil:
		if methods(w, r, http.MethodGet) {
			writeJSON(w, http.StatusOK, chassis(s.system(seg[1])))
		}
	default:
		notFound()
	}
}

// serveSystem answers GET and PATCH of a System.
func (s *Server) serveSystem(w http.ResponseWriter, r *http.Request, sys *system) {
	if r.Method == http.MethodPatch {
		change, ok := readRequest(w, r, parseSystemPatch)
		if !ok {
			return
		}
		sys.setBoot(change)
	}
	writeJSON(w, http.StatusOK, computerSystem(sys))
}

// serveReset answers a #ComputerSystem.Reset: 204 once done.
func (s *Server) serveReset(w http.ResponseWriter, r *http.Request, sys *system) {
	resetType, ok := readRequest(w, r, parseReset)
	if !ok {
		return
	}
	if apiErr := sys.reset(s.ctx, resetType); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readRequest reads a request's body (bounded) and parses it; on a bad body it writes the
// error and returns false.
func readRequest[T any](w http.ResponseWriter, r *http.Request, parse func([]byte) (T, *apiError)) (T, bool) {
	var v T
	body, apiErr := readBody(r)
	if apiErr == nil {
		v, apiErr = parse(body)
	}
	if apiErr != nil {
		writeError(w, apiErr)
		return v, false
	}
	return v, true
}

func readBody(r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "MalformedJSON", fmt.Sprintf("reading the body: %v", err))
	}
	if len(body) > maxBody {
		return nil, errorf(http.StatusRequestEntityTooLarge, "GeneralError", fmt.Sprintf("the body is larger than %d bytes", maxBody))
	}
	return body, nil
}

// methods answers 405 (with Allow) unless r's method is one of allowed.
func methods(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	for _, m := range allowed {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeError(w, errorf(http.StatusMethodNotAllowed, "OperationNotAllowed",
		fmt.Sprintf("%s of %s is not supported: allowed %s", r.Method, r.URL.Path, strings.Join(allowed, ", "))))
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"Base.1.8.InternalError","message":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func randomHex(prefix string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(b), nil
}
