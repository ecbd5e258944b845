package main

import (
	"context"
	"log/slog"

	"github.com/edgefleet/edgefleet/kms/setup"
	"github.com/edgefleet/edgefleet/pkg/command"
)

func main() {
	opts := setup.DefaultOptions()
	command.Main("edgefleet-kms", opts.AddFlags, func(ctx context.Context, log *slog.Logger) error {
		return setup.Run(ctx, opts, log)
	})
}
