package bmc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgefleet/edgefleet/test/bmc"
	"github.com/edgefleet/edgefleet/test/testutil"
)

// fakeMachine is a Machine of memory: it records what the BMC asked of it. Its OS powers off
// on a power-button press when listens is set.
type fakeMachine struct {
	mu       sync.Mutex
	on       bool
	listens  bool
	failNext error
	calls    []string
}

func (f *fakeMachine) record(call string) error {
	f.calls = append(f.calls, call)
	err := f.failNext
	f.failNext = nil
	return err
}

func (f *fakeMachine) PowerOn(b bmc.Boot) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on {
		return errors.New("fake: power on of a running machine")
	}
	if err := f.record(fmt.Sprintf("PowerOn(%s)", b)); err != nil {
		return err
	}
	f.on = true
	return nil
}

func (f *fakeMachine) Reset(b bmc.Boot) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return errors.New("fake: reset of an off machine")
	}
	return f.record(fmt.Sprintf("Reset(%s)", b))
}

func (f *fakeMachine) PowerOff() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("PowerOff"); err != nil {
		return err
	}
	f.on = false
	return nil
}

func (f *fakeMachine) PressPowerButton() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("PressPowerButton"); err != nil {
		return err
	}
	if f.listens {
		f.on = false
	}
	return nil
}

func (f *fakeMachine) PoweredOn() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on
}

func (f *fakeMachine) Info() bmc.MachineInfo {
	return bmc.MachineInfo{Name: "fake-0", UUID: "6a1c0ffe-0000-4000-8000-000000000001", MAC: "52:54:00:00:00:01", CPUs: 2, MemoryMiB: 1536}
}

// takeCalls returns the calls so far and forgets them.
func (f *fakeMachine) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// bed is a server with one fake machine, system "sys-0".
type bed struct {
	t   *testing.T
	srv *bmc.Server
	m   *fakeMachine
}

func newBed(t *testing.T, opts bmc.Options) *bed {
	t.Helper()
	srv := bmc.StartT(t, opts)
	m := &fakeMachine{}
	if _, err := srv.AddSystem("sys-0", m); err != nil {
		t.Fatal(err)
	}
	return &bed{t: t, srv: srv, m: m}
}

// do sends a request with the server's credentials (auth false: none) and returns the status
// and the decoded JSON body (nil when there is none).
func (b *bed) do(method, path, body string, auth bool) (int, map[string]any) {
	b.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.srv.URL+path, r)
	if err != nil {
		b.t.Fatal(err)
	}
	if auth {
		req.SetBasicAuth(b.srv.User, b.srv.Password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return resp.StatusCode, nil
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		b.t.Fatalf("%s %s: %d, body not JSON: %v: %s", method, path, resp.StatusCode, err, raw)
	}
	return resp.StatusCode, out
}

// must is do with credentials that expects status want.
func (b *bed) must(method, path, body string, want int) map[string]any {
	b.t.Helper()
	status, out := b.do(method, path, body, true)
	if status != want {
		b.t.Fatalf("%s %s %s: %d, want %d: %v", method, path, body, status, want, out)
	}
	return out
}

func (b *bed) system() map[string]any {
	b.t.Helper()
	return b.must(http.MethodGet, "/redfish/v1/Systems/sys-0", "", http.StatusOK)
}

func (b *bed) reset(resetType string) {
	b.t.Helper()
	b.must(http.MethodPost, "/redfish/v1/Systems/sys-0/Actions/ComputerSystem.Reset", `{"ResetType":"`+resetType+`"}`, http.StatusNoContent)
}

func (b *bed) patch(body string) {
	b.t.Helper()
	b.must(http.MethodPatch, "/redfish/v1/Systems/sys-0", body, http.StatusOK)
}

// get reads a property by its path ("Boot/BootSourceOverrideTarget").
func get(doc map[string]any, path string) any {
	var v any = doc
	for _, k := range strings.Split(path, "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func (b *bed) wantProps(doc map[string]any, want map[string]any) {
	b.t.Helper()
	for path, w := range want {
		if got := get(doc, path); fmt.Sprint(got) != fmt.Sprint(w) {
			b.t.Errorf("%s = %v, want %v", path, got, w)
		}
	}
}

func (b *bed) wantCalls(want ...string) {
	b.t.Helper()
	if got := b.m.takeCalls(); !slices.Equal(got, want) {
		b.t.Errorf("machine calls %q, want %q", got, want)
	}
}

func TestAuthentication(t *testing.T) {
	b := newBed(t, bmc.Options{})
	if len(b.srv.Password) < 32 || b.srv.User == "" {
		t.Fatalf("credentials made for the server: user %q, a password of %d characters; want a random one of 32 or more", b.srv.User, len(b.srv.Password))
	}
	for _, tc := range []struct {
		name, user, password string
	}{
		{name: "no credentials"},
		{name: "wrong password", user: b.srv.User, password: b.srv.Password + "x"},
		{name: "wrong user", user: "admin", password: b.srv.Password},
		{name: "empty password", user: b.srv.User},
	} {
		for _, path := range []string{"/redfish/v1/Systems", "/redfish/v1/Systems/sys-0", "/redfish/v1/Managers/BMC", "/redfish/v1/nothing"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.user != "" || tc.password != "" {
				req.SetBasicAuth(tc.user, tc.password)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: GET %s: %s, want 401", tc.name, path, resp.Status)
			}
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s: GET %s: WWW-Authenticate %q, want a Basic challenge", tc.name, path, resp.Header.Get("WWW-Authenticate"))
			}
			if !strings.Contains(string(body), "authentication") {
				t.Errorf("%s: GET %s: body %s does not say authentication", tc.name, path, body)
			}
		}
	}
	// A refused request changed nothing.
	if status, _ := b.do(http.MethodPost, "/redfish/v1/Systems/sys-0/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`, false); status != http.StatusUnauthorized {
		t.Errorf("reset without credentials: %d, want 401", status)
	}
	b.wantCalls()
	// The service root is public; the rest answers the right credentials.
	if status, _ := b.do(http.MethodGet, "/redfish/v1/", "", false); status != http.StatusOK {
		t.Errorf("GET /redfish/v1/ without credentials: %d, want 200 (Redfish's service root is public)", status)
	}
	b.must(http.MethodGet, "/redfish/v1/Systems", "", http.StatusOK)
	for _, r := range b.srv.Requests() {
		if strings.Contains(r.String(), b.srv.Password) {
			t.Errorf("request log entry %q holds the password", r)
		}
	}
}

// TestResources walks the service from its root as a client does, by @odata.id links.
func TestResources(t *testing.T) {
	b := newBed(t, bmc.Options{})
	rootDoc := b.must(http.MethodGet, "/redfish/v1/", "", http.StatusOK)
	b.wantProps(rootDoc, map[string]any{
		"@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot", "Id": "RootService",
		"Systems/@odata.id": "/redfish/v1/Systems", "Managers/@odata.id": "/redfish/v1/Managers", "Chassis/@odata.id": "/redfish/v1/Chassis",
	})
	// Trailing slashes are the same resource.
	b.must(http.MethodGet, "/redfish/v1", "", http.StatusOK)
	b.must(http.MethodGet, "/redfish/v1/Systems/", "", http.StatusOK)

	member := func(collectionPath, wantType string) string {
		c := b.must(http.MethodGet, collectionPath, "", http.StatusOK)
		b.wantProps(c, map[string]any{"@odata.id": collectionPath, "@odata.type": wantType, "Members@odata.count": 1})
		members, _ := c["Members"].([]any)
		if len(members) != 1 {
			t.Fatalf("%s: members %v, want one", collectionPath, c["Members"])
		}
		return get(members[0].(map[string]any), "@odata.id").(string)
	}
	sysPath := member(get(rootDoc, "Systems/@odata.id").(string), "#ComputerSystemCollection.ComputerSystemCollection")
	if sysPath != "/redfish/v1/Systems/sys-0" {
		t.Fatalf("system member %s, want /redfish/v1/Systems/sys-0", sysPath)
	}
	sys := b.must(http.MethodGet, sysPath, "", http.StatusOK)
	b.wantProps(sys, map[string]any{
		"@odata.id": sysPath, "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
		"Id": "sys-0", "Name": "fake-0", "UUID": "6a1c0ffe-0000-4000-8000-000000000001", "PowerState": "Off",
		"Boot/BootSourceOverrideTarget": "None", "Boot/BootSourceOverrideEnabled": "Disabled", "Boot/BootSourceOverrideMode": "Legacy",
		"Boot/BootSourceOverrideTarget@Redfish.AllowableValues":           []any{"None", "Pxe", "Hdd", "Cd"},
		"ProcessorSummary/Count":                                          2,
		"MemorySummary/TotalSystemMemoryGiB":                              1.5,
		"Actions/#ComputerSystem.Reset/target":                            sysPath + "/Actions/ComputerSystem.Reset",
		"Actions/#ComputerSystem.Reset/ResetType@Redfish.AllowableValues": []any{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PushPowerButton"},
	})
	chassisPath := get(sys, "Links/Chassis").([]any)[0].(map[string]any)["@odata.id"].(string)
	managerPath := get(sys, "Links/ManagedBy").([]any)[0].(map[string]any)["@odata.id"].(string)
	if got := member(get(rootDoc, "Chassis/@odata.id").(string), "#ChassisCollection.ChassisCollection"); got != chassisPath {
		t.Errorf("chassis member %s, the system links %s", got, chassisPath)
	}
	if got := member(get(rootDoc, "Managers/@odata.id").(string), "#ManagerCollection.ManagerCollection"); got != managerPath {
		t.Errorf("manager member %s, the system links %s", got, managerPath)
	}
	ch := b.must(http.MethodGet, chassisPath, "", http.StatusOK)
	b.wantProps(ch, map[string]any{"@odata.id": chassisPath, "@odata.type": "#Chassis.v1_14_0.Chassis", "Id": "sys-0", "ChassisType": "RackMount"})
	mgr := b.must(http.MethodGet, managerPath, "", http.StatusOK)
	b.wantProps(mgr, map[string]any{"@odata.id": managerPath, "@odata.type": "#Manager.v1_10_0.Manager", "ManagerType": "BMC"})
	if got := fmt.Sprint(get(mgr, "Links/ManagerForServers")); !strings.Contains(got, sysPath) {
		t.Errorf("manager's ManagerForServers %s, want %s in it", got, sysPath)
	}
	b.wantCalls() // reading changed nothing
}

// TestBootOverride: Once holds for the next boot the BMC starts, then turns Disabled;
// Continuous holds for every boot; the mode picks the firmware.
func TestBootOverride(t *testing.T) {
	b := newBed(t, bmc.Options{})
	b.patch(`{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`)
	b.wantProps(b.system(), map[string]any{"Boot/BootSourceOverrideTarget": "Pxe", "Boot/BootSourceOverrideEnabled": "Once"})
	b.reset("On")
	b.wantCalls("PowerOn(first Pxe, later None, Legacy)")
	b.wantProps(b.system(), map[string]any{"PowerState": "On", "Boot/BootSourceOverrideEnabled": "Disabled", "Boot/BootSourceOverrideTarget": "Pxe"})
	b.reset("ForceRestart")
	b.wantCalls("Reset(first None, later None, Legacy)")

	// Once, set while the machine runs, applies to the restart.
	b.patch(`{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`)
	b.reset("ForceRestart")
	b.wantCalls("Reset(first Cd, later None, Legacy)")
	b.wantProps(b.system(), map[string]any{"Boot/BootSourceOverrideEnabled": "Disabled"})
	b.reset("ForceOff")
	b.wantCalls("PowerOff")
	b.reset("On")
	b.wantCalls("PowerOn(first None, later None, Legacy)")

	// Continuous stays, and sets later boots too; the mode applies from the next boot.
	b.patch(`{"Boot":{"BootSourceOverrideTarget":"Hdd","BootSourceOverrideEnabled":"Continuous","BootSourceOverrideMode":"UEFI"}}`)
	b.reset("ForceRestart")
	b.reset("ForceOff")
	b.reset("On")
	b.wantCalls("Reset(first Hdd, later Hdd, UEFI)", "PowerOff", "PowerOn(first Hdd, later Hdd, UEFI)")
	b.wantProps(b.system(), map[string]any{"Boot/BootSourceOverrideTarget": "Hdd", "Boot/BootSourceOverrideEnabled": "Continuous", "Boot/BootSourceOverrideMode": "UEFI"})

	// Disabled: the target is kept and ignored. Only what a PATCH names changes.
	b.patch(`{"Boot":{"BootSourceOverrideEnabled":"Disabled"}}`)
	b.reset("ForceRestart")
	b.wantCalls("Reset(first None, later None, UEFI)")
	b.patch(`{"Boot":{"BootSourceOverrideEnabled":"Once", "HttpBootUri": null}}`)
	b.wantProps(b.system(), map[string]any{"Boot/BootSourceOverrideTarget": "Hdd", "Boot/BootSourceOverrideEnabled": "Once", "Boot/BootSourceOverrideMode": "UEFI"})
}

// TestResetTypes: each reset type from each power state.
func TestResetTypes(t *testing.T) {
	for _, tc := range []struct {
		resetType string
		on        bool
		calls     []string
		wantOn    bool
	}{
		{"On", false, []string{"PowerOn(first None, later None, Legacy)"}, true},
		{"On", true, nil, true},
		{"ForceOff", true, []string{"PowerOff"}, false},
		{"ForceOff", false, nil, false},
		{"GracefulShutdown", true, []string{"PressPowerButton"}, false},
		{"GracefulShutdown", false, nil, false},
		{"ForceRestart", true, []string{"Reset(first None, later None, Legacy)"}, true},
		{"ForceRestart", false, []string{"PowerOn(first None, later None, Legacy)"}, true},
		{"GracefulRestart", false, []string{"PowerOn(first None, later None, Legacy)"}, true},
		{"PushPowerButton", true, []string{"PressPowerButton"}, false},
		{"PushPowerButton", false, []string{"PowerOn(first None, later None, Legacy)"}, true},
	} {
		t.Run(fmt.Sprintf("%s from %v", tc.resetType, map[bool]string{true: "on", false: "off"}[tc.on]), func(t *testing.T) {
			b := newBed(t, bmc.Options{})
			b.m.on, b.m.listens = tc.on, true
			b.reset(tc.resetType)
			b.wantCalls(tc.calls...)
			want := map[bool]string{true: "On", false: "Off"}[tc.wantOn]
			b.wantProps(b.system(), map[string]any{"PowerState": want})
		})
	}

	t.Run("GracefulRestart of an OS that powers off", func(t *testing.T) {
		b := newBed(t, bmc.Options{})
		b.m.on, b.m.listens = true, true
		b.patch(`{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`)
		b.reset("GracefulRestart")
		testutil.Eventually(t, 10*time.Second, func() error {
			if !b.m.PoweredOn() {
				return errors.New("the machine is still off after the OS's shutdown")
			}
			return nil
		})
		b.wantCalls("PressPowerButton", "PowerOn(first Pxe, later None, Legacy)")
		b.wantProps(b.system(), map[string]any{"PowerState": "On", "Boot/BootSourceOverrideEnabled": "Disabled"})
	})

	t.Run("GracefulRestart of an OS that ignores the button", func(t *testing.T) {
		b := newBed(t, bmc.Options{GracefulTimeout: 300 * time.Millisecond})
		b.m.on = true
		b.reset("GracefulRestart")
		time.Sleep(time.Second) // three times the timeout: the BMC gave up
		b.wantCalls("PressPowerButton")
		b.wantProps(b.system(), map[string]any{"PowerState": "On"})
	})

	t.Run("GracefulRestart overtaken by ForceOff", func(t *testing.T) {
		b := newBed(t, bmc.Options{GracefulTimeout: 5 * time.Second})
		b.m.on = true
		b.reset("GracefulRestart")
		b.reset("ForceOff")
		time.Sleep(500 * time.Millisecond) // the pending restart polls every 100 ms
		b.wantCalls("PressPowerButton", "PowerOff")
		b.wantProps(b.system(), map[string]any{"PowerState": "Off"})
	})

	t.Run("machine failure", func(t *testing.T) {
		b := newBed(t, bmc.Options{})
		b.m.failNext = errors.New("qemu: no disk")
		out := b.must(http.MethodPost, "/redfish/v1/Systems/sys-0/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`, http.StatusInternalServerError)
		if msg := fmt.Sprint(get(out, "error/message")); !strings.Contains(msg, "qemu: no disk") {
			t.Errorf("error message %q does not carry the machine's error", msg)
		}
	})
}

// TestBadRequests: bad bodies are 400s naming the property and change nothing; unknown paths
// are 404s, wrong methods 405s.
func TestBadRequests(t *testing.T) {
	b := newBed(t, bmc.Options{})
	for _, tc := range []struct {
		name, body string
		wantInMsg  string // the field the message must name
		wantRel    string // RelatedProperties, when any
	}{
		{"target not allowed", `{"Boot":{"BootSourceOverrideTarget":"Floppy"}}`, "Boot/BootSourceOverrideTarget", "#/Boot/BootSourceOverrideTarget"},
		{"target not a string", `{"Boot":{"BootSourceOverrideTarget":1}}`, "Boot/BootSourceOverrideTarget", "#/Boot/BootSourceOverrideTarget"},
		{"enabled not allowed", `{"Boot":{"BootSourceOverrideEnabled":"Sometimes"}}`, "Boot/BootSourceOverrideEnabled", "#/Boot/BootSourceOverrideEnabled"},
		{"enabled a bool", `{"Boot":{"BootSourceOverrideEnabled":true}}`, "Boot/BootSourceOverrideEnabled", "#/Boot/BootSourceOverrideEnabled"},
		{"mode not allowed", `{"Boot":{"BootSourceOverrideMode":"Bios"}}`, "Boot/BootSourceOverrideMode", "#/Boot/BootSourceOverrideMode"},
		{"unknown boot property", `{"Boot":{"BootNext":"0001"}}`, "Boot/BootNext", "#/Boot/BootNext"},
		{"read-only annotation", `{"Boot":{"BootSourceOverrideTarget@Redfish.AllowableValues":["Pxe"]}}`, "Boot/BootSourceOverrideTarget@Redfish.AllowableValues", ""},
		{"HTTP boot", `{"Boot":{"HttpBootUri":"http://10.0.2.2/boot.efi"}}`, "Boot/HttpBootUri", "#/Boot/HttpBootUri"},
		{"read-only property", `{"PowerState":"On"}`, "PowerState", "#/PowerState"},
		{"boot not an object", `{"Boot":"Pxe"}`, "Boot", "#/Boot"},
		{"no boot", `{}`, "Boot", "#/Boot"},
		{"not JSON", `Boot=Pxe`, "JSON", ""},
		{"not an object", `["Boot"]`, "JSON", ""},
		{"two values", `{"Boot":{}} {"Boot":{}}`, "JSON", ""},
		// All or nothing: the good target of a bad body is not applied either.
		{"good and bad", `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Always"}}`, "Boot/BootSourceOverrideEnabled", ""},
	} {
		status, out := b.do(http.MethodPatch, "/redfish/v1/Systems/sys-0", tc.body, true)
		if status != http.StatusBadRequest {
			t.Errorf("%s: PATCH %s: %d, want 400: %v", tc.name, tc.body, status, out)
			continue
		}
		msg := fmt.Sprint(get(out, "error/message"))
		if !strings.Contains(msg, tc.wantInMsg) {
			t.Errorf("%s: PATCH %s: message %q does not name %s", tc.name, tc.body, msg, tc.wantInMsg)
		}
		info, _ := get(out, "error/@Message.ExtendedInfo").([]any)
		if len(info) != 1 || !strings.HasPrefix(fmt.Sprint(get(info[0].(map[string]any), "MessageId")), "Base.1.8.") {
			t.Errorf("%s: extended info %v, want one Base.1.8 message", tc.name, info)
		} else if tc.wantRel != "" && fmt.Sprint(get(info[0].(map[string]any), "RelatedProperties")) != "["+tc.wantRel+"]" {
			t.Errorf("%s: RelatedProperties %v, want [%s]", tc.name, get(info[0].(map[string]any), "RelatedProperties"), tc.wantRel)
		}
	}
	b.wantProps(b.system(), map[string]any{"Boot/BootSourceOverrideTarget": "None", "Boot/BootSourceOverrideEnabled": "Disabled", "Boot/BootSourceOverrideMode": "Legacy"})

	resetPath := "/redfish/v1/Systems/sys-0/Actions/ComputerSystem.Reset"
	for _, tc := range []struct{ body, wantInMsg string }{
		{`{"ResetType":"Nmi"}`, "ResetType"},
		{`{"ResetType":"ForceOn"}`, "ResetType"},
		{`{"ResetType":""}`, "ResetType"},
		{`{"ResetType":1}`, "ResetType"},
		{`{}`, "ResetType"},
		{`{"ResetType":"On","Delay":5}`, "Delay"},
		{`On`, "JSON"},
	} {
		status, out := b.do(http.MethodPost, resetPath, tc.body, true)
		if msg := fmt.Sprint(get(out, "error/message")); status != http.StatusBadRequest || !strings.Contains(msg, tc.wantInMsg) {
			t.Errorf("reset %s: %d %q, want 400 naming %s", tc.body, status, msg, tc.wantInMsg)
		}
	}
	b.wantCalls() // nothing reached the machine

	for _, tc := range []struct {
		method, path string
		want         int
		allow        string
	}{
		{http.MethodDelete, "/redfish/v1/Systems/sys-0", http.StatusMethodNotAllowed, "GET, PATCH"},
		{http.MethodGet, resetPath, http.StatusMethodNotAllowed, "POST"},
		{http.MethodPost, "/redfish/v1/Systems", http.StatusMethodNotAllowed, "GET"},
		{http.MethodGet, "/redfish/v1/Systems/sys-1", http.StatusNotFound, ""},
		{http.MethodPost, "/redfish/v1/Systems/sys-1/Actions/ComputerSystem.Reset", http.StatusNotFound, ""},
		{http.MethodGet, "/redfish/v1/Systems/sys-0/Bios", http.StatusNotFound, ""},
		{http.MethodGet, "/redfish/v1/Managers/BMC/VirtualMedia", http.StatusNotFound, ""},
		{http.MethodGet, "/redfish/v1/UpdateService", http.StatusNotFound, ""},
		{http.MethodGet, "/redfish/v1x", http.StatusNotFound, ""},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, b.srv.URL+tc.path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(b.srv.User, b.srv.Password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || resp.Header.Get("Allow") != tc.allow || !strings.Contains(string(body), `"error"`) {
			t.Errorf("%s %s: %s, Allow %q, body %s; want %d, Allow %q and a Redfish error", tc.method, tc.path, resp.Status, resp.Header.Get("Allow"), body, tc.want, tc.allow)
		}
	}
	// No SessionService: sushy's login attempt gets a 404 (and falls back to basic
	// authentication), not a 401 that reads as wrong credentials.
	if status, _ := b.do(http.MethodPost, "/redfish/v1/SessionService/Sessions", `{"UserName":"u","Password":"p"}`, false); status != http.StatusNotFound {
		t.Errorf("POST SessionService/Sessions: %d, want 404", status)
	}
}

func TestRequestLog(t *testing.T) {
	b := newBed(t, bmc.Options{RequestLogSize: 3})
	b.do(http.MethodGet, "/redfish/v1/Systems", "", false)
	b.must(http.MethodGet, "/redfish/v1/Systems", "", http.StatusOK)
	b.do(http.MethodPatch, "/redfish/v1/Systems/sys-0", `{"Boot":{"BootSourceOverrideTarget":"Floppy"}}`, true)
	b.reset("On")
	got := b.srv.Requests()
	var lines []string
	for _, r := range got {
		lines = append(lines, fmt.Sprintf("%s %s %d %s", r.Method, r.Path, r.Status, r.User))
	}
	want := []string{
		"GET /redfish/v1/Systems 200 " + b.srv.User,
		"PATCH /redfish/v1/Systems/sys-0 400 " + b.srv.User,
		"POST /redfish/v1/Systems/sys-0/Actions/ComputerSystem.Reset 204 " + b.srv.User,
	}
	if !slices.Equal(lines, want) {
		t.Errorf("request log %q, want the latest three %q", lines, want)
	}
	if !strings.HasPrefix(b.srv.RequestLog(), "(1 earlier requests dropped)") {
		t.Errorf("request log text does not say one request was dropped:\n%s", b.srv.RequestLog())
	}
}

func TestOptions(t *testing.T) {
	if srv, err := bmc.Start(bmc.Options{Mode: "Bios"}); err == nil {
		srv.Close()
		t.Errorf("Start took boot mode Bios")
	}
	user, password := "admin-"+randomWord(t), randomWord(t)+randomWord(t)
	b := newBed(t, bmc.Options{Mode: bmc.ModeUEFI, User: user, Password: password})
	if b.srv.User != user || b.srv.Password != password {
		t.Errorf("the server does not take the credentials given")
	}
	b.must(http.MethodGet, "/redfish/v1/Systems", "", http.StatusOK)
	b.wantProps(b.system(), map[string]any{"Boot/BootSourceOverrideMode": "UEFI"})
	b.reset("On")
	b.wantCalls("PowerOn(first None, later None, UEFI)")
}

func TestAddSystem(t *testing.T) {
	srv := bmc.StartT(t, bmc.Options{})
	if p, err := srv.AddSystem("vm-0", &fakeMachine{}); err != nil || p != "/redfish/v1/Systems/vm-0" {
		t.Errorf("AddSystem(vm-0) = %q, %v; want /redfish/v1/Systems/vm-0", p, err)
	}
	for _, id := range []string{"vm-0", "", "a/b", "../x", "a b"} {
		if _, err := srv.AddSystem(id, &fakeMachine{}); err == nil {
			t.Errorf("AddSystem(%q) took it", id)
		}
	}
}
