package bmc

import (
	"slices"
	"strings"
	"testing"
)

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		first Device
		want  []Device
	}{
		{DeviceNone, []Device{DeviceHdd, DeviceCd, DevicePxe}},
		{"", []Device{DeviceHdd, DeviceCd, DevicePxe}},
		{DevicePxe, []Device{DevicePxe, DeviceHdd, DeviceCd}},
		{DeviceHdd, []Device{DeviceHdd, DeviceCd, DevicePxe}},
		{DeviceCd, []Device{DeviceCd, DeviceHdd, DevicePxe}},
	} {
		if got := Order(tc.first); !slices.Equal(got, tc.want) {
			t.Errorf("Order(%q) = %v, want %v", tc.first, got, tc.want)
		}
	}
}

// TestQEMUArgs checks the command line's boot indexes, NIC backends, firmware and escaping.
func TestQEMUArgs(t *testing.T) {
	v := &VM{
		cfg:  Config{Name: "vm-0", MemoryMiB: 128, CPUs: 1, MAC: "52:54:00:aa:bb:cc", UUID: "u", OVMFCode: "/ovmf/code.fd"},
		Disk: "/d/a,b.raw", SerialLog: "/d/serial.log", FirmwareLog: "/d/fw.log", QMPSocket: "/d/qmp.sock", UEFIVars: "/d/vars.fd",
	}
	devices := func(args []string) map[string]string {
		out := map[string]string{}
		for i, a := range args {
			if a == "-device" {
				kind, _, _ := strings.Cut(args[i+1], ",")
				out[kind] = args[i+1]
			}
		}
		return out
	}
	for _, tc := range []struct {
		first          Device
		nic, disk, cdr string
	}{
		{DevicePxe, "bootindex=1", "bootindex=2", "bootindex=3"},
		{DeviceHdd, "bootindex=3", "bootindex=1", "bootindex=2"},
		{DeviceCd, "bootindex=3", "bootindex=2", "bootindex=1"},
		{DeviceNone, "bootindex=3", "bootindex=1", "bootindex=2"},
	} {
		d := devices(qemuArgs(v, Boot{First: tc.first, Mode: ModeLegacy}))
		for kind, want := range map[string]string{"virtio-net-pci": tc.nic, "virtio-blk-pci": tc.disk, "ide-cd": tc.cdr} {
			if !strings.HasSuffix(d[kind], ","+want) {
				t.Errorf("first %s: %s is %q, want %s", tc.first, kind, d[kind], want)
			}
		}
		if !strings.Contains(d["virtio-net-pci"], "mac=52:54:00:aa:bb:cc") {
			t.Errorf("NIC %q lacks the MAC", d["virtio-net-pci"])
		}
	}

	joined := strings.Join(qemuArgs(v, Boot{First: DevicePxe, Mode: ModeLegacy}), " ")
	for _, want := range []string{"-accel tcg", "-boot strict=on", "-netdev user,id=net0", "file=/d/a,,b.raw", "-uuid u", "-m 128"} {
		if !strings.Contains(joined, want) {
			t.Errorf("command line lacks %q: %s", want, joined)
		}
	}
	if strings.Contains(joined, "pflash") {
		t.Errorf("a Legacy boot has UEFI firmware: %s", joined)
	}
	uefi := strings.Join(qemuArgs(v, Boot{First: DevicePxe, Mode: ModeUEFI}), " ")
	for _, want := range []string{"if=pflash,format=raw,readonly=on,file=/ovmf/code.fd", "if=pflash,format=raw,file=/d/vars.fd"} {
		if !strings.Contains(uefi, want) {
			t.Errorf("UEFI command line lacks %q: %s", want, uefi)
		}
	}

	v.cfg.Network = Network{Tap: "tap0", Netns: "/run/netns/x"}
	if tap := strings.Join(qemuArgs(v, Boot{}), " "); !strings.Contains(tap, "-netdev tap,id=net0,script=no,downscript=no,ifname=tap0") {
		t.Errorf("tap network missing: %s", tap)
	}
	v.cfg.Network = Network{TFTPRoot: "/srv/tftp", BootFile: "http://10.0.2.2:8080/boot.ipxe"}
	if user := strings.Join(qemuArgs(v, Boot{}), " "); !strings.Contains(user, "-netdev user,id=net0,tftp=/srv/tftp,bootfile=http://10.0.2.2:8080/boot.ipxe") {
		t.Errorf("user network's TFTP and boot file missing: %s", user)
	}
	v.cfg.Network = Network{HostForwards: []HostForward{{Host: 40001, Guest: 9999}}}
	if user := strings.Join(qemuArgs(v, Boot{}), " "); !strings.Contains(user, "-netdev user,id=net0,hostfwd=tcp:127.0.0.1:40001-:9999") {
		t.Errorf("user network's host forward missing: %s", user)
	}
}

func TestNewVMConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no dir":           {DiskSize: 1 << 20},
		"no disk size":     {Dir: t.TempDir()},
		"bad MAC":          {Dir: t.TempDir(), DiskSize: 1 << 20, MAC: "52:54:00"},
		"tap with TFTP":    {Dir: t.TempDir(), DiskSize: 1 << 20, Network: Network{Tap: "tap0", TFTPRoot: "/srv"}},
		"tap with forward": {Dir: t.TempDir(), DiskSize: 1 << 20, Network: Network{Tap: "tap0", HostForwards: []HostForward{{Host: 1, Guest: 2}}}},
		"forward port 0":   {Dir: t.TempDir(), DiskSize: 1 << 20, Network: Network{HostForwards: []HostForward{{Host: 0, Guest: 9999}}}},
		"long socket path": {Dir: "/tmp/" + strings.Repeat("x", 100), DiskSize: 1 << 20},
	} {
		if _, err := NewVM(cfg); err == nil {
			t.Errorf("%s: NewVM took %+v", name, cfg)
		}
	}
}
