package applicationcluster

import (
	"fmt"
	"reflect"
	"testing"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

func TestHardware(t *testing.T) {
	if got := hardware(nil); got != nil {
		t.Errorf("hardware(nil) = %+v, want nil (not inspected)", got)
	}
	d := &metal3api.HardwareDetails{
		SystemVendor: metal3api.HardwareSystemVendor{Manufacturer: "QEMU", ProductName: "Standard PC", SerialNumber: "not summarized"},
		RAMMebibytes: 4096,
		CPU:          metal3api.CPU{Count: 2, Model: "QEMU Virtual CPU", Arch: "x86_64"},
		// One interface per address, as Metal3 lists them; out of order.
		NIC: []metal3api.NIC{
			{Name: "ens3", MAC: "52:54:00:00:00:02", IP: "192.0.2.3", SpeedGbps: 10},
			{Name: "ens2", MAC: "52:54:00:00:00:01", IP: "192.0.2.2", SpeedGbps: 1},
			{Name: "ens2", MAC: "52:54:00:00:00:01", IP: "fe80::1", SpeedGbps: 1},
		},
		Storage: []metal3api.Storage{
			{Name: "/dev/vdb", SizeBytes: 1 << 30, Type: metal3api.SSD},
			{Name: "/dev/vda", SizeBytes: 8 << 30, Type: metal3api.HDD, Model: "QEMU HARDDISK"},
		},
	}
	want := &sitev1.HostHardware{
		Manufacturer: "QEMU", ProductName: "Standard PC", CPUs: 2, CPUModel: "QEMU Virtual CPU", MemoryMiB: 4096,
		Disks: []sitev1.HostDisk{{Name: "/dev/vda", SizeBytes: 8 << 30, Type: "HDD", Model: "QEMU HARDDISK"}, {Name: "/dev/vdb", SizeBytes: 1 << 30, Type: "SSD"}},
		NICs:  []sitev1.HostNIC{{Name: "ens2", MAC: "52:54:00:00:00:01", SpeedGbps: 1}, {Name: "ens3", MAC: "52:54:00:00:00:02", SpeedGbps: 10}},
	}
	if got := hardware(d); !reflect.DeepEqual(got, want) {
		t.Errorf("hardware = %+v\nwant %+v", got, want)
	}

	// A machine with more disks and interfaces than a summary lists: the first by name.
	d = &metal3api.HardwareDetails{}
	for i := range sitev1.MaxHardwareItems + 4 {
		d.Storage = append(d.Storage, metal3api.Storage{Name: fmt.Sprintf("/dev/sd%c", 'z'-i)})
		d.NIC = append(d.NIC, metal3api.NIC{Name: fmt.Sprintf("eth%02d", 30-i)})
	}
	got := hardware(d)
	if len(got.Disks) != sitev1.MaxHardwareItems || got.Disks[0].Name != "/dev/sdg" || len(got.NICs) != sitev1.MaxHardwareItems || got.NICs[0].Name != "eth11" {
		t.Errorf("a large machine's hardware = %+v, want the first %d disks and NICs by name", got, sitev1.MaxHardwareItems)
	}
}
