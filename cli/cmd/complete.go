package cmd

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
)

// completeNames completes with the names of resource's objects in the namespace; in a
// comma-separated list value (--sites a,b), the last element.
func (g *globals) completeNames(resource string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		k, err := g.kube()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names, err := k.names(ctx, resource)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		given := toComplete[:strings.LastIndexByte(toComplete, ',')+1]
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(given+n, toComplete) {
				out = append(out, given+n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeArg completes a command's one argument with the names of resource's objects.
func (g *globals) completeArg(resource string) cobra.CompletionFunc {
	names := g.completeNames(resource)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(cmd, args, toComplete)
	}
}
