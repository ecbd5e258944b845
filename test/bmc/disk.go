package bmc

import (
	"fmt"
	"io"
	"os"
)

// createDisk creates a sparse raw image of size bytes at path unless a file is there already.
func createDisk(path string, size int64) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if size <= 0 {
		return fmt.Errorf("disk %s does not exist and DiskSize is %d: give a size to create it", path, size)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create disk: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("create disk %s: %w", path, err)
	}
	return f.Close()
}

// uefiVars copies the UEFI variable store template into Dir unless a store is there already.
func (v *VM) uefiVars() error {
	if _, err := os.Stat(v.cfg.OVMFCode); err != nil {
		return fmt.Errorf("UEFI firmware (apt-get install ovmf): %w", err)
	}
	if _, err := os.Stat(v.UEFIVars); err == nil {
		return nil
	}
	src, err := os.Open(v.cfg.OVMFVars)
	if err != nil {
		return fmt.Errorf("UEFI variables template (apt-get install ovmf): %w", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(v.UEFIVars, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
