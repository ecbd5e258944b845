package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// outputFormats names the values --output takes.
const outputFormats = "table (default), wide, json, yaml or jsonpath=TEMPLATE"

// printer prints in the format --output asks for: for people (table, wide) each command draws
// its own, for programs (json, yaml, jsonpath) data prints any value.
type printer struct {
	// format is "" (table), "wide", "json", "yaml" or "jsonpath".
	format string
	// template is the parsed jsonpath template.
	template *jsonpath.JSONPath
}

// parseOutput checks an --output value.
func parseOutput(s string) (printer, error) {
	switch {
	case s == "" || s == "table":
		return printer{}, nil
	case s == "wide" || s == "json" || s == "yaml":
		return printer{format: s}, nil
	case strings.HasPrefix(s, "jsonpath="):
		// As kubectl's -o jsonpath: a key an object lacks prints nothing.
		t := jsonpath.New("output").AllowMissingKeys(true)
		if err := t.Parse(strings.TrimPrefix(s, "jsonpath=")); err != nil {
			return printer{}, fmt.Errorf("--output %s: %w", s, err)
		}
		return printer{format: "jsonpath", template: t}, nil
	}
	return printer{}, fmt.Errorf("--output must be %s, got %q", outputFormats, s)
}

// structured reports whether the output is for programs: json, yaml or jsonpath.
func (p printer) structured() bool { return p.format != "" && p.format != "wide" }

// wide reports whether people asked for more detail.
func (p printer) wide() bool { return p.format == "wide" }

// data prints v as JSON, YAML or through the jsonpath template, and reports whether it did:
// for table and wide it prints nothing and the caller draws its own.
func (p printer) data(w io.Writer, v any) (bool, error) {
	switch p.format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	case "jsonpath":
		// The template runs over v's JSON form, as kubectl's does.
		b, err := json.Marshal(v)
		if err != nil {
			return true, err
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			return true, err
		}
		if err := p.template.Execute(w, doc); err != nil {
			return true, fmt.Errorf("--output jsonpath: %w", err)
		}
		return true, nil
	}
	return false, nil
}
