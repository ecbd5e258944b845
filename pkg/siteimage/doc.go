// Package siteimage writes a site's identity into a copy of the generic base image of a site's
// bootstrap machine (usb-image/build.sh) without rebuilding it, and reads it back.
//
// The base ISO holds /edgefleet/identity.img, the identity area: AreaSize bytes that ISO 9660
// stores contiguously, so they are the same bytes of the ISO file and of a USB stick written
// from it. The area starts with a text header line of HeaderSize bytes at most (NUL-padded):
//
//	EDGEFLEET-IDENTITY v1 LENGTH SHA256
//
// LENGTH is the payload's size in bytes (0 in the base image), SHA256 its hex digest. The
// payload follows the header: the global controller's URL, a newline, the Site's
// "namespace/name", a newline, the enrollment token, a newline, then the CA certificate(s) to
// pin, in PEM. The rest of the area is NULs. The boot
// glue (usb-image/boot/edgefleet-identity) reads the same format at boot.
package siteimage
