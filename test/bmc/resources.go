package bmc

import "slices"

// The documents the service answers with: Redfish resources as JSON objects, each with its
// @odata.id (its path) and @odata.type (its schema, namespace and version).

const (
	root        = "/redfish/v1"
	managerID   = "BMC" // the one manager: the BMC itself
	managerPath = root + "/Managers/" + managerID
)

type doc = map[string]any

func link(path string) doc { return doc{"@odata.id": path} }

func links(paths ...string) []doc {
	out := make([]doc, 0, len(paths))
	for _, p := range paths {
		out = append(out, link(p))
	}
	return out
}

func systemPath(id string) string  { return root + "/Systems/" + id }
func chassisPath(id string) string { return root + "/Chassis/" + id }

// serviceRoot is /redfish/v1/. It has no SessionService: clients authenticate with HTTP basic
// authentication.
func (s *Server) serviceRoot() doc {
	return doc{
		"@odata.type":    "#ServiceRoot.v1_5_0.ServiceRoot",
		"@odata.id":      root + "/",
		"Id":             "RootService",
		"Name":           "edgefleet test BMC",
		"RedfishVersion": "1.11.0",
		"UUID":           s.uuid,
		"Product":        "edgefleet test BMC (qemu)",
		"Systems":        link(root + "/Systems"),
		"Managers":       link(root + "/Managers"),
		"Chassis":        link(root + "/Chassis"),
	}
}

func collection(odataType, name, path string, members []string) doc {
	return doc{
		"@odata.type":         odataType,
		"@odata.id":           path,
		"Name":                name,
		"Members@odata.count": len(members),
		"Members":             links(members...),
	}
}

func (s *Server) systemPaths(path func(string) string) []string {
	var out []string
	for _, id := range s.systemIDs() {
		out = append(out, path(id))
	}
	return out
}

// computerSystem is a System: its power state (the machine's), boot override, hardware and
// reset action.
func computerSystem(sys *system) doc {
	info := sys.machine.Info()
	boot := sys.boot()
	power := "Off"
	if sys.machine.PoweredOn() {
		power = "On"
	}
	path := systemPath(sys.id)
	d := doc{
		"@odata.type":  "#ComputerSystem.v1_13_0.ComputerSystem",
		"@odata.id":    path,
		"Id":           sys.id,
		"Name":         info.Name,
		"UUID":         info.UUID,
		"Manufacturer": "QEMU",
		"Model":        "Standard PC (i440FX + PIIX, 1996)",
		"SystemType":   "Virtual",
		"PowerState":   power,
		"Status":       doc{"State": "Enabled", "Health": "OK"},
		"Boot": doc{
			"BootSourceOverrideTarget":                          boot.Target,
			"BootSourceOverrideTarget@Redfish.AllowableValues":  devices,
			"BootSourceOverrideEnabled":                         boot.Enabled,
			"BootSourceOverrideEnabled@Redfish.AllowableValues": overrideFrequencies,
			"BootSourceOverrideMode":                            boot.Mode,
			"BootSourceOverrideMode@Redfish.AllowableValues":    modes,
		},
		"ProcessorSummary": doc{"Count": info.CPUs, "Status": doc{"State": "Enabled", "Health": "OK"}},
		"MemorySummary": doc{
			"TotalSystemMemoryGiB": float64(info.MemoryMiB) / 1024,
			"Status":               doc{"State": "Enabled", "Health": "OK"},
		},
		"Links": doc{
			"Chassis":   links(chassisPath(sys.id)),
			"ManagedBy": links(managerPath),
		},
		"Actions": doc{
			"#ComputerSystem.Reset": doc{
				"target":                            path + "/Actions/ComputerSystem.Reset",
				"ResetType@Redfish.AllowableValues": slices.Clone(resetTypes),
			},
		},
	}
	// Virtual media under the System (Redfish 1.13's place, which Ironic looks at before
	// the managers'): one manager serves every system here, so its media would be shared.
	if sys.media != nil {
		d["VirtualMedia"] = link(mediaCollectionPath(sys.id))
	}
	return d
}

// manager is the BMC: one manager for all the server's systems.
func (s *Server) manager() doc {
	return doc{
		"@odata.type":     "#Manager.v1_10_0.Manager",
		"@odata.id":       managerPath,
		"Id":              managerID,
		"Name":            "edgefleet test BMC",
		"ManagerType":     "BMC",
		"UUID":            s.uuid,
		"FirmwareVersion": "edgefleet-test",
		"Status":          doc{"State": "Enabled", "Health": "OK"},
		"Links": doc{
			"ManagerForServers": links(s.systemPaths(systemPath)...),
			"ManagerForChassis": links(s.systemPaths(chassisPath)...),
		},
	}
}

// chassis is the enclosure of one system (a VM is its own box), named as the system.
func chassis(sys *system) doc {
	power := "Off"
	if sys.machine.PoweredOn() {
		power = "On"
	}
	return doc{
		"@odata.type": "#Chassis.v1_14_0.Chassis",
		"@odata.id":   chassisPath(sys.id),
		"Id":          sys.id,
		"Name":        sys.machine.Info().Name,
		"ChassisType": "RackMount",
		"PowerState":  power,
		"Status":      doc{"State": "Enabled", "Health": "OK"},
		"Links": doc{
			"ComputerSystems": links(systemPath(sys.id)),
			"ManagedBy":       links(managerPath),
		},
	}
}
