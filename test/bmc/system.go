package bmc

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Machine is what a System manages: a VM, or a test's fake.
type Machine interface {
	// PowerOn starts the machine, booting as b says. It is called only while it is off.
	PowerOn(b Boot) error
	// Reset restarts the running machine, booting as b says.
	Reset(b Boot) error
	// PowerOff stops it at once.
	PowerOff() error
	// PressPowerButton presses the power button (ACPI): the OS decides what to do.
	PressPowerButton() error
	// PoweredOn reports whether it runs.
	PoweredOn() bool
	// Info describes its hardware.
	Info() MachineInfo
}

// The boot override's frequencies (BootSourceOverrideEnabled).
const (
	overrideDisabled   = "Disabled"
	overrideOnce       = "Once"
	overrideContinuous = "Continuous"
)

var overrideFrequencies = []string{overrideDisabled, overrideOnce, overrideContinuous}

// devices are the override targets a System allows, in the order Redfish lists them.
var devices = []Device{DeviceNone, DevicePxe, DeviceHdd, DeviceCd}

// The reset types a System allows (ResetType of #ComputerSystem.Reset).
const (
	resetOn               = "On"
	resetForceOff         = "ForceOff"
	resetGracefulShutdown = "GracefulShutdown"
	resetForceRestart     = "ForceRestart"
	resetGracefulRestart  = "GracefulRestart"
	resetPushPowerButton  = "PushPowerButton"
)

var resetTypes = []string{resetOn, resetForceOff, resetGracefulShutdown, resetForceRestart, resetGracefulRestart, resetPushPowerButton}

var modes = []Mode{ModeLegacy, ModeUEFI}

// system is the BMC's side of one machine: its boot settings and what its reset types do. Its
// power state is the machine's.
type system struct {
	id      string
	machine Machine
	// media is the virtual CD drive; nil unless the machine is a MediaMachine.
	media *virtualMedia
	// gracefulTimeout bounds how long a GracefulRestart waits for the OS to power off.
	gracefulTimeout time.Duration
	logf            func(format string, args ...any)

	mu      sync.Mutex
	target  Device // BootSourceOverrideTarget
	enabled string // BootSourceOverrideEnabled
	mode    Mode   // BootSourceOverrideMode: the firmware of the next power-on
	// generation counts power actions: a pending GracefulRestart gives up when another
	// action came after it.
	generation int
}

func newSystem(id string, m Machine, mode Mode, gracefulTimeout time.Duration, logf func(string, ...any)) *system {
	s := &system{id: id, machine: m, target: DeviceNone, enabled: overrideDisabled, mode: mode, gracefulTimeout: gracefulTimeout, logf: logf}
	if mm, ok := m.(MediaMachine); ok {
		s.media = &virtualMedia{machine: mm}
	}
	return s
}

// bootSettings is a snapshot of the boot override.
type bootSettings struct {
	Target  Device
	Enabled string
	Mode    Mode
}

func (s *system) boot() bootSettings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bootSettings{s.target, s.enabled, s.mode}
}

// setBoot applies a validated change of the boot override; nil fields stay.
func (s *system) setBoot(c bootChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.target != nil {
		s.target = *c.target
	}
	if c.enabled != nil {
		s.enabled = *c.enabled
	}
	if c.mode != nil {
		s.mode = *c.mode
	}
}

// nextBootLocked is how the coming boot goes: the override's target first when the override
// is on, and the same for later boots only when it is Continuous.
func (s *system) nextBootLocked() Boot {
	b := Boot{First: DeviceNone, Later: DeviceNone, Mode: s.mode}
	if s.enabled != overrideDisabled {
		b.First = s.target
	}
	if s.enabled == overrideContinuous {
		b.Later = s.target
	}
	return b
}

// bootedLocked records that the machine booted: a one-time override is spent. (Redfish: "the
// system boots one time to the boot source override target; then BootSourceOverrideEnabled is
// reset to Disabled"; the target stays as it was.)
func (s *system) bootedLocked() {
	if s.enabled == overrideOnce {
		s.enabled = overrideDisabled
	}
}

// powerOnLocked powers the machine on with the coming boot's settings.
func (s *system) powerOnLocked() error {
	b := s.nextBootLocked()
	if err := s.machine.PowerOn(b); err != nil {
		return err
	}
	s.bootedLocked()
	return nil
}

// reset performs a #ComputerSystem.Reset. Actions that find the machine already where they
// would take it do nothing and succeed; the restarts and the power button power an off
// machine on.
func (s *system) reset(ctx context.Context, resetType string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.generation++
	on := s.machine.PoweredOn()
	var err error
	switch resetType {
	case resetOn:
		if !on {
			err = s.powerOnLocked()
		}
	case resetForceOff:
		if on {
			err = s.machine.PowerOff()
		}
	case resetGracefulShutdown:
		if on {
			err = s.machine.PressPowerButton()
		}
	case resetForceRestart:
		if !on {
			err = s.powerOnLocked()
		} else if err = s.machine.Reset(s.nextBootLocked()); err == nil {
			s.bootedLocked()
		}
	case resetGracefulRestart:
		if !on {
			err = s.powerOnLocked()
		} else if err = s.machine.PressPowerButton(); err == nil {
			go s.powerOnAfterShutdown(ctx, s.generation)
		}
	case resetPushPowerButton:
		if on {
			err = s.machine.PressPowerButton()
		} else {
			err = s.powerOnLocked()
		}
	default:
		return errorf(http.StatusBadRequest, "ActionParameterNotSupported",
			fmt.Sprintf("ResetType %q is not supported by system %s; allowed: %v", resetType, s.id, resetTypes), pointer("ResetType"))
	}
	if err != nil {
		return errorf(http.StatusInternalServerError, "InternalError", fmt.Sprintf("system %s: %s: %v", s.id, resetType, err))
	}
	return nil
}

// powerOnAfterShutdown finishes a GracefulRestart: it powers the machine on once the OS
// powered it off. It gives up when the OS does not within gracefulTimeout (as a BMC whose
// host ignores the power button), when another power action came since, or when ctx ends.
func (s *system) powerOnAfterShutdown(ctx context.Context, generation int) {
	deadline := time.Now().Add(s.gracefulTimeout)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		s.mu.Lock()
		switch {
		case s.generation != generation:
			s.mu.Unlock()
			return
		case !s.machine.PoweredOn():
			err := s.powerOnLocked()
			s.mu.Unlock()
			if err != nil {
				s.logf("bmc: system %s: GracefulRestart: power on after the shutdown: %v", s.id, err)
			}
			return
		case time.Now().After(deadline):
			s.mu.Unlock()
			s.logf("bmc: system %s: GracefulRestart: the OS did not power off within %s; left on", s.id, s.gracefulTimeout)
			return
		}
		s.mu.Unlock()
	}
}
