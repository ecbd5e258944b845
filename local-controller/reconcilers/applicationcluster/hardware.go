package applicationcluster

import (
	"cmp"
	"slices"

	metal3api "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	sitev1 "github.com/edgefleet/edgefleet/api/site/v1alpha1"
)

// hardware summarizes what Metal3's inspection found of a host (nil: not inspected): the
// system, CPUs and memory, and the first sitev1.MaxHardwareItems disks and network interfaces
// by name. Metal3 lists an interface once per address it has; the summary lists it once.
func hardware(d *metal3api.HardwareDetails) *sitev1.HostHardware {
	if d == nil {
		return nil
	}
	hw := &sitev1.HostHardware{
		Manufacturer: d.SystemVendor.Manufacturer, ProductName: d.SystemVendor.ProductName,
		CPUs: int32(d.CPU.Count), CPUModel: d.CPU.Model, MemoryMiB: int64(d.RAMMebibytes),
	}
	for _, s := range d.Storage {
		hw.Disks = append(hw.Disks, sitev1.HostDisk{Name: s.Name, SizeBytes: int64(s.SizeBytes), Type: string(s.Type), Model: s.Model})
	}
	slices.SortFunc(hw.Disks, func(a, b sitev1.HostDisk) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range d.NIC {
		hw.NICs = append(hw.NICs, sitev1.HostNIC{Name: n.Name, MAC: n.MAC, SpeedGbps: int32(n.SpeedGbps)})
	}
	slices.SortFunc(hw.NICs, func(a, b sitev1.HostNIC) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.MAC, b.MAC)) })
	hw.NICs = slices.CompactFunc(hw.NICs, func(a, b sitev1.HostNIC) bool { return a.Name == b.Name && a.MAC == b.MAC })
	hw.Disks = hw.Disks[:min(len(hw.Disks), sitev1.MaxHardwareItems)]
	hw.NICs = hw.NICs[:min(len(hw.NICs), sitev1.MaxHardwareItems)]
	return hw
}
