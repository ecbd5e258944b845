package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/edgefleet/edgefleet/bpa/setup"
	"github.com/edgefleet/edgefleet/pkg/sitelogs"
	"github.com/edgefleet/edgefleet/pkg/version"
)

func main() {
	fs := flag.NewFlagSet("bpa", flag.ExitOnError)
	opts := setup.DefaultOptions()
	opts.AddFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	_ = fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println(version.Version)
		return
	}
	opts.Logs = sitelogs.NewRing(sitelogs.DefaultRingLines, sitelogs.DefaultRingBytes)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.RawZapOpts(opts.Logs.Tee())))

	if err := setup.Run(ctrl.SetupSignalHandler(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "bpa:", err)
		os.Exit(1)
	}
}
