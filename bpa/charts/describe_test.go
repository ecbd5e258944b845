package charts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgefleet/edgefleet/bpa/charts"
	"github.com/edgefleet/edgefleet/test/builders"
)

func TestDescribe(t *testing.T) {
	annotate := func(ns string) func(dir string) {
		return func(dir string) {
			f, err := os.OpenFile(filepath.Join(dir, "Chart.yaml"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("annotations:\n  " + charts.NamespaceAnnotation + ": " + ns + "\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name    string
		archive []byte
		want    charts.Metadata
		wantErr string
	}{
		{"the chart's name as namespace", builders.BuildChart(t, "hello", "0.4.0", nil).Archive,
			charts.Metadata{Name: "hello", Version: "0.4.0", Namespace: "hello"}, ""},
		{"the annotation's namespace", builders.BuildChart(t, "hello", "", annotate("kube-system")).Archive,
			charts.Metadata{Name: "hello", Version: "0.1.0", Namespace: "kube-system"}, ""},
		{"a namespace that is no DNS label", builders.BuildChart(t, "hello", "", annotate("Kube_System")).Archive,
			charts.Metadata{}, `namespace "Kube_System"`},
		{"not a chart", []byte("not a chart"), charts.Metadata{}, "not a chart archive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := charts.Describe(tt.archive)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Describe = %+v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Describe = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
