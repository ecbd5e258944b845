package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/edgefleet/edgefleet/local-controller/setup"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "enroll" {
		enroll(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "site-init" {
		siteInit(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "pack-import" {
		packImport(os.Args[2:])
		return
	}
	if err := setup.Main("local-controller", os.Args[1:], setup.DefaultOptions()); err != nil {
		fmt.Fprintln(os.Stderr, "local-controller:", err)
		os.Exit(1)
	}
}

// subcommand parses the arguments of `local-controller NAME` into the flags bind binds (and
// the logging flags), and sets up logging.
func subcommand(name string, args []string, bind func(*flag.FlagSet)) {
	fs := flag.NewFlagSet("local-controller "+name, flag.ExitOnError)
	bind(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	_ = fs.Parse(args)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
}

// enroll runs `local-controller enroll`: the site's first boot hands the global controller its
// credential in exchange for the enrollment token.
func enroll(args []string) {
	opts := setup.DefaultEnrollOptions()
	subcommand("enroll", args, opts.AddFlags)
	if err := setup.RunEnroll(ctrl.SetupSignalHandler(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "local-controller enroll:", err)
		os.Exit(1)
	}
}

// siteInit runs `local-controller site-init`: the bootstrap machine's site control plane files
// (PKI, kubeconfigs, encryption configuration), made once and kept right at every boot.
func siteInit(args []string) {
	opts := setup.DefaultSiteInitOptions()
	subcommand("site-init", args, opts.AddFlags)
	if err := setup.RunSiteInit(ctrl.SetupSignalHandler(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "local-controller site-init:", err)
		os.Exit(1)
	}
}

// packImport runs `local-controller pack-import`: the air-gapped site pack on the boot medium
// goes into the site cache before the local controller starts. Its summary line goes to stdout
// (the console, at boot).
func packImport(args []string) {
	opts := setup.DefaultPackImportOptions()
	subcommand("pack-import", args, opts.AddFlags)
	res, err := setup.RunPackImport(ctrl.SetupSignalHandler(), opts)
	if err != nil {
		fmt.Println("EDGEFLEET-PACK-ERROR", err)
		os.Exit(1)
	}
	fmt.Println(res)
}
