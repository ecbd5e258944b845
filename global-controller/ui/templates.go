package ui

import (
	"fmt"
	"html/template"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// pageTemplates are the templates under templates/, each parsed with layout.html: a page
// defines "content" (inside the layout) and "live" (the part live streams replace).
var pageTemplates = []string{"login", "error", "overview", "sites", "site", "campaigns", "campaign", "clusters", "releases"}

// parseTemplates parses each page with the layout.
func parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"age":          age,
		"siteURL":      func(ns, name string) string { return objectURL("sites", ns, name) },
		"campaignURL":  func(ns, name string) string { return objectURL("campaigns", ns, name) },
		"lower":        strings.ToLower,
		"percent":      percent,
		"stateClass":   func(s any) string { return "state-" + strings.ToLower(fmt.Sprint(s)) },
		"statusClass":  func(s any) string { return "status-" + strings.ToLower(fmt.Sprint(s)) },
		"query":        func(k, v string) string { return url.Values{k: {v}}.Encode() },
		"shortDigest":  shortDigest,
		"formatTime":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"inNamespaces": inNamespaces,
		"inc":          func(n int) int { return n + 1 },
		"conditionTable": func(now time.Time, conds []metav1.Condition) any {
			return struct {
				Now        time.Time
				Conditions []metav1.Condition
			}{now, conds}
		},
		"dec": func(n int) int { return n - 1 },
		// bytes is a size as people read it: "1.5 MiB".
		"bytes": func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) },
	}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("parse the web UI's layout: %w", err)
	}
	pages := make(map[string]*template.Template, len(pageTemplates))
	for _, name := range pageTemplates {
		t, err := template.Must(layout.Clone()).ParseFS(assets, path.Join("templates", name+".html"))
		if err != nil {
			return nil, fmt.Errorf("parse the web UI's %s page: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// age is how long ago t was, as kubectl says it ("5m", "3d"); "-" when t is zero.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t))
}

func objectURL(kind, ns, name string) string {
	return Prefix + kind + "/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
}

func percent(part, whole int32) int {
	if whole <= 0 {
		return 0
	}
	return int(int64(part) * 100 / int64(whole))
}

// shortDigest is the first 12 hex digits of a sha256.
func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// inNamespaces names the namespace, or says all.
func inNamespaces(ns string) string {
	if ns == "" {
		return "all namespaces"
	}
	return "namespace " + ns
}
