// Package host reconciles Host objects: it binds each host to its Site and enforces that a boot
// MAC is unique across the fleet. The earliest-registered host keeps a MAC (creation
// times have a one-second resolution; ties go to the lower namespace/name); every later host
// with the same MAC gets BootMACUnique=False naming that host, and is not Ready.
package host
