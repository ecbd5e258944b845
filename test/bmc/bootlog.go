package bmc

import (
	"bufio"
	"bytes"
	"os"
	"strings"
)

// BootAttempts are the boot devices SeaBIOS tried since the VM last started or reset (through
// PowerOn or Reset, or the guest's own reboot), in order, as its log says them ("Booting from ROM..." is the NIC's iPXE, "Booting from Hard
// Disk...", "Booting from DVD/CD..."). It is what the firmware did, not what was asked of it.
// UEFI boots log to the serial console instead (OVMF's "BdsDxe: loading Boot0001 ..." lines).
func (v *VM) BootAttempts() ([]string, error) {
	v.mu.Lock()
	from := v.bootLogFrom
	v.mu.Unlock()
	b, err := os.ReadFile(v.FirmwareLog)
	if err != nil {
		return nil, err
	}
	if from <= int64(len(b)) {
		b = b[from:]
	}
	// SeaBIOS announces itself (twice) at each start: what follows the last announcement is
	// the latest boot's, a reboot of the guest's own included.
	if i := bytes.LastIndex(b, []byte("SeaBIOS (version")); i >= 0 {
		b = b[i:]
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "Booting from ") && strings.HasSuffix(line, "...") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

// markBootLocked notes where the firmware log of the coming boot starts.
func (v *VM) markBootLocked() {
	v.bootLogFrom = 0
	if st, err := os.Stat(v.FirmwareLog); err == nil {
		v.bootLogFrom = st.Size()
	}
}
