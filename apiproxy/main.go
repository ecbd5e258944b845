package main

import (
	"context"
	"log/slog"

	"github.com/edgefleet/edgefleet/apiproxy/proxy"
	"github.com/edgefleet/edgefleet/pkg/command"
)

func main() {
	opts := proxy.DefaultOptions()
	command.Main("edgefleet-apiproxy", opts.AddFlags, func(ctx context.Context, log *slog.Logger) error {
		return proxy.Run(ctx, opts, log)
	})
}
