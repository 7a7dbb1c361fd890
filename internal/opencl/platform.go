package opencl

import (
	"fmt"
	"strings"
	"unsafe"
)

// OpenCL's enumeration constants (cl.h).
const (
	clDeviceTypeAll       = 0xFFFFFFFF
	clPlatformVersion     = 0x0901
	clPlatformName        = 0x0902
	clPlatformVendor      = 0x0903
	clDeviceType          = 0x1000
	clDeviceComputeUnits  = 0x1002
	clDeviceMaxWorkGroup  = 0x1004
	clDeviceMaxAlloc      = 0x1010
	clDeviceGlobalMem     = 0x101F
	clDeviceLocalMem      = 0x1023
	clDeviceName          = 0x102B
	clDeviceVendor        = 0x102C
	clDriverVersion       = 0x102D
	clDeviceVersion       = 0x102F
	clDeviceExtensions    = 0x1030
	clDeviceDoubleFP      = 0x1032
	clDeviceOpenCLCVer    = 0x103D
	clContextPlatform     = 0x1084
	statusDeviceNotFound  = -1
	statusPlatformMissing = -1001
)

// found is a device with the handles Open needs.
type found struct {
	info               DeviceInfo
	platform, deviceID uintptr
}

// Devices lists every OpenCL device of every platform, in platform order
// and then the platform's own order: the order opencl:N counts in. No
// loader, no platform or no device is an error naming what to install.
func Devices() ([]DeviceInfo, error) {
	fs, err := enumerate()
	if err != nil {
		return nil, err
	}
	return infos(fs), nil
}

func enumerate() ([]found, error) {
	if err := loadOpenCL(); err != nil {
		return nil, err
	}
	var n uint32
	st := Status(int32(call(cl.getPlatformIDs, 0, 0, uintptr(unsafe.Pointer(&n)))))
	if st == statusPlatformMissing || (st == 0 && n == 0) {
		return nil, &missingError{ErrNoPlatform, "clGetPlatformIDs: " + statusNames[statusPlatformMissing], platformFix}
	}
	if st != 0 {
		return nil, &Error{Op: "clGetPlatformIDs", Status: st}
	}
	platforms := make([]uintptr, n)
	if err := check("clGetPlatformIDs", call(cl.getPlatformIDs, uintptr(n), uintptr(unsafe.Pointer(&platforms[0])), uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	var out []found
	var names []string
	for pi, p := range platforms[:n] {
		pname := infoString(cl.getPlatformInfo, p, clPlatformName)
		names = append(names, pname)
		var nd uint32
		st := Status(int32(call(cl.getDeviceIDs, p, clDeviceTypeAll, 0, 0, uintptr(unsafe.Pointer(&nd)))))
		if st == statusDeviceNotFound || nd == 0 {
			continue // a platform without devices (its driver sees no hardware)
		}
		if st != 0 {
			return nil, &Error{Op: "clGetDeviceIDs on platform " + pname, Status: st}
		}
		ids := make([]uintptr, nd)
		if err := check("clGetDeviceIDs", call(cl.getDeviceIDs, p, clDeviceTypeAll, uintptr(nd), uintptr(unsafe.Pointer(&ids[0])), uintptr(unsafe.Pointer(&nd)))); err != nil {
			return nil, err
		}
		for di, id := range ids[:nd] {
			d := DeviceInfo{
				Index:           len(out),
				Platform:        pi,
				PlatformName:    pname,
				PlatformVendor:  infoString(cl.getPlatformInfo, p, clPlatformVendor),
				PlatformVersion: infoString(cl.getPlatformInfo, p, clPlatformVersion),
				Device:          di,
				Name:            infoString(cl.getDeviceInfo, id, clDeviceName),
				Vendor:          infoString(cl.getDeviceInfo, id, clDeviceVendor),
				Type:            DeviceType(infoUint(id, clDeviceType, 8)),
				GlobalMem:       infoUint(id, clDeviceGlobalMem, 8),
				MaxAlloc:        infoUint(id, clDeviceMaxAlloc, 8),
				LocalMem:        infoUint(id, clDeviceLocalMem, 8),
				ComputeUnits:    int(infoUint(id, clDeviceComputeUnits, 4)),
				MaxWorkGroup:    int(infoUint(id, clDeviceMaxWorkGroup, unsafe.Sizeof(uintptr(0)))),
				Version:         infoString(cl.getDeviceInfo, id, clDeviceVersion),
				OpenCLC:         infoString(cl.getDeviceInfo, id, clDeviceOpenCLCVer),
				DriverVersion:   infoString(cl.getDeviceInfo, id, clDriverVersion),
			}
			exts := " " + infoString(cl.getDeviceInfo, id, clDeviceExtensions) + " "
			d.FP64 = strings.Contains(exts, " cl_khr_fp64 ") || infoUint(id, clDeviceDoubleFP, 8) != 0
			out = append(out, found{d, p, id})
		}
	}
	if len(out) == 0 {
		return nil, &missingError{ErrNoPlatform, "the platforms " + strings.Join(names, ", ") + " have no device", platformFix}
	}
	return out, nil
}

// infoString is a string property (clGetPlatformInfo, clGetDeviceInfo);
// "" when the implementation does not give it.
func infoString(fn, h uintptr, param uint32) string {
	var n uintptr
	if call(fn, h, uintptr(param), 0, 0, uintptr(unsafe.Pointer(&n))) != 0 || n == 0 {
		return ""
	}
	b := make([]byte, n)
	if call(fn, h, uintptr(param), n, uintptr(unsafe.Pointer(&b[0])), 0) != 0 {
		return ""
	}
	return strings.TrimSpace(fromC(b))
}

// infoUint is a numeric device property of width bytes (cl_uint,
// cl_ulong, size_t, cl_bitfield); 0 when not given.
func infoUint(id uintptr, param uint32, width uintptr) uint64 {
	var v uint64 // little or big endian: read back at its own width
	if call(cl.getDeviceInfo, id, uintptr(param), width, uintptr(unsafe.Pointer(&v)), 0) != 0 {
		return 0
	}
	if width == 4 {
		return uint64(*(*uint32)(unsafe.Pointer(&v)))
	}
	return v
}

// Open opens the device sel asks for, with its context and command queue:
//
//   - cpu opens nothing and loads nothing: (nil, "", nil).
//   - opencl:N opens device N of Devices' list; opencl the first GPU, or
//     when there is none the first device (a CPU runtime such as PoCL, as
//     in tests). No loader, no platform or no such device is an error.
//   - auto opens the first GPU and never a CPU device; when there is none
//     (or no loader, no platform) it returns (nil, note, nil) so that the
//     caller runs on the CPU and prints the note, one line saying why.
//
// When a device opens, note says which one (DeviceInfo.String).
func Open(sel Selection) (dev *Device, note string, err error) {
	switch sel.Mode {
	case ModeCPU:
		return nil, "", nil
	case ModeAuto:
		fs, err := enumerate()
		if err != nil {
			return nil, "device auto: " + err.Error() + "; running on the CPU", nil
		}
		i, why := choose(sel, infos(fs))
		if i < 0 {
			return nil, "device auto: " + why + "; running on the CPU", nil
		}
		d, err := openDevice(fs[i])
		if err != nil {
			return nil, "", fmt.Errorf("device auto: %w", err)
		}
		return d, "device auto: " + d.Info.String(), nil
	}
	fs, err := enumerate()
	if err != nil {
		return nil, "", fmt.Errorf("device %v: %w", sel, err)
	}
	i, why := choose(sel, infos(fs))
	if i < 0 {
		return nil, "", fmt.Errorf("device %v: %s", sel, why)
	}
	d, err := openDevice(fs[i])
	if err != nil {
		return nil, "", fmt.Errorf("device %v: %w", sel, err)
	}
	return d, "device " + sel.String() + ": " + d.Info.String(), nil
}

func infos(fs []found) []DeviceInfo {
	out := make([]DeviceInfo, len(fs))
	for i, f := range fs {
		out[i] = f.info
	}
	return out
}
