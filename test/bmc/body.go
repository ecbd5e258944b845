package bmc

// The request bodies the service takes: a PATCH of a System and a #ComputerSystem.Reset,
// validated whole before anything changes.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// bootChange is a validated PATCH of a System: the Boot properties it sets (nil: unchanged).
type bootChange struct {
	target  *Device
	enabled *string
	mode    *Mode
}

// maxBody bounds the bodies the server reads.
const maxBody = 64 << 10

// parseSystemPatch validates the body of a PATCH of a System. Only Boot's override properties
// are writable; anything else is refused with the property's name, and nothing is changed.
func parseSystemPatch(body []byte) (bootChange, *apiError) {
	var c bootChange
	var top map[string]json.RawMessage
	if err := strictUnmarshal(body, &top); err != nil || top == nil {
		return c, errorf(http.StatusBadRequest, "MalformedJSON", fmt.Sprintf("the body is not a JSON object: %v", errOrNull(err)))
	}
	for _, name := range sortedKeys(top) {
		if name != "Boot" {
			return c, notWritable(name)
		}
	}
	raw, ok := top["Boot"]
	if !ok {
		return c, errorf(http.StatusBadRequest, "PropertyMissing", "nothing to change: the body has no Boot property (the only writable one)", pointer("Boot"))
	}
	var boot map[string]json.RawMessage
	if err := json.Unmarshal(raw, &boot); err != nil || boot == nil {
		return c, errorf(http.StatusBadRequest, "PropertyValueTypeError", fmt.Sprintf("Boot must be an object, not %s", raw), pointer("Boot"))
	}
	for _, name := range sortedKeys(boot) {
		v := boot[name]
		path := "Boot/" + name
		switch name {
		case "BootSourceOverrideTarget":
			s, err := enumValue(path, v, devices)
			if err != nil {
				return c, err
			}
			c.target = &s
		case "BootSourceOverrideEnabled":
			s, err := enumValue(path, v, overrideFrequencies)
			if err != nil {
				return c, err
			}
			c.enabled = &s
		case "BootSourceOverrideMode":
			s, err := enumValue(path, v, modes)
			if err != nil {
				return c, err
			}
			c.mode = &s
		case "HttpBootUri":
			// sushy clears a URI left from an HTTP boot with null; there is none to clear.
			if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				return c, errorf(http.StatusBadRequest, "PropertyValueNotInList",
					fmt.Sprintf("%s: HTTP boot (UefiHttp) is not supported: only null is accepted", path), pointer(path))
			}
		default:
			return c, notWritable(path)
		}
	}
	return c, nil
}

// enumValue decodes a string property that must be one of allowed.
func enumValue[T ~string](path string, raw json.RawMessage, allowed []T) (T, *apiError) {
	var s T
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, errorf(http.StatusBadRequest, "PropertyValueTypeError",
			fmt.Sprintf("%s must be a string, one of %v; not %s", path, allowed, raw), pointer(path))
	}
	if !slices.Contains(allowed, s) {
		return s, errorf(http.StatusBadRequest, "PropertyValueNotInList",
			fmt.Sprintf("%s: %q is not one of the allowable values %v", path, s, allowed), pointer(path))
	}
	return s, nil
}

// notWritable refuses a property: read-only, or unknown.
func notWritable(path string) *apiError {
	return errorf(http.StatusBadRequest, "PropertyNotWritable",
		fmt.Sprintf("%s is not writable here (unknown or read-only): a System takes Boot/BootSourceOverrideTarget, Boot/BootSourceOverrideEnabled and Boot/BootSourceOverrideMode", path),
		pointer(path))
}

// strictUnmarshal decodes one JSON value and refuses trailing data.
func strictUnmarshal(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

func errOrNull(err error) string {
	if err == nil {
		return "it is null"
	}
	return err.Error()
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// parseReset validates the body of a #ComputerSystem.Reset and returns its ResetType.
func parseReset(body []byte) (string, *apiError) {
	var req map[string]json.RawMessage
	if err := strictUnmarshal(body, &req); err != nil || req == nil {
		return "", errorf(http.StatusBadRequest, "MalformedJSON", fmt.Sprintf("the body is not a JSON object: %v", errOrNull(err)))
	}
	for _, name := range sortedKeys(req) {
		if name != "ResetType" {
			return "", errorf(http.StatusBadRequest, "ActionParameterUnknown",
				fmt.Sprintf("#ComputerSystem.Reset has no parameter %s (only ResetType)", name), pointer(name))
		}
	}
	raw, ok := req["ResetType"]
	if !ok {
		return "", errorf(http.StatusBadRequest, "ActionParameterMissing",
			fmt.Sprintf("#ComputerSystem.Reset needs ResetType, one of %s", strings.Join(resetTypes, ", ")), pointer("ResetType"))
	}
	var t string
	if err := json.Unmarshal(raw, &t); err != nil {
		return "", errorf(http.StatusBadRequest, "ActionParameterValueTypeError",
			fmt.Sprintf("ResetType must be a string, one of %s; not %s", strings.Join(resetTypes, ", "), raw), pointer("ResetType"))
	}
	return t, nil
}
