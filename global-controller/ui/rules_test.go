package ui

import (
	"slices"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
)

func TestSitesGettable(t *testing.T) {
	rule := func(groups, resources, verbs, names []string) authzv1.ResourceRule {
		return authzv1.ResourceRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
	}
	fleet, sites, get := []string{"fleet.edgefleet.io"}, []string{"sites"}, []string{"get"}
	for _, tc := range []struct {
		name      string
		rules     []authzv1.ResourceRule
		wantNames []string
		wantAll   bool
	}{
		{name: "no rules", rules: nil},
		{name: "named sites, over two rules", rules: []authzv1.ResourceRule{rule(fleet, sites, get, []string{"a"}), rule(fleet, sites, []string{"get", "watch"}, []string{"b"})},
			wantNames: []string{"a", "b"}},
		{name: "an unnamed rule grants every site", rules: []authzv1.ResourceRule{rule(fleet, sites, get, []string{"a"}), rule(fleet, sites, get, nil)}, wantAll: true},
		{name: "wildcards", rules: []authzv1.ResourceRule{rule([]string{"*"}, []string{"*"}, []string{"*"}, nil)}, wantAll: true},
		{name: "other verbs, resources and groups name nothing", rules: []authzv1.ResourceRule{
			rule(fleet, sites, []string{"list"}, nil), rule(fleet, []string{"hosts"}, get, nil), rule(fleet, []string{"sites/enrollment"}, get, []string{"x"}),
			rule([]string{""}, sites, get, nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, all := sitesGettable(tc.rules)
			if all != tc.wantAll || !slices.Equal(names, tc.wantNames) {
				t.Errorf("sitesGettable = %v, %v; want %v, %v", names, all, tc.wantNames, tc.wantAll)
			}
		})
	}
}
