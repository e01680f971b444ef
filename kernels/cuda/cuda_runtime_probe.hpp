// Whether this build has the CUDA kernels, and whether this process can use
// a GPU. Plain C++: CPU-only builds and the engine include it freely.
//
// Nothing here touches CUDA at library load or static initialisation.
// PostgreSQL loads the extension in the postmaster and forks backends, and a
// CUDA context does not survive fork(), so CUDA is initialised lazily, in the
// process that first calls cuda_device_available() (docs/design.md).
#pragma once

#include <string>

namespace kvg {

// True when the CUDA kernels were compiled into this build (KVG_HAVE_CUDA).
bool cuda_compiled();

// True when a CUDA device can run this build's kernels; `why` (if given) then
// names the device. Otherwise false, and `why` says why: no CUDA support
// compiled in, no driver, no device, a device this build has no code for, or
// the CUDA error text. The first call initialises CUDA in the calling
// process; the answer is remembered for the life of the process.
bool cuda_device_available(std::string* why = nullptr);

// Records that the device failed with an error other than running out of
// memory (a kernel fault, a lost device, a sticky launch error). A CUDA
// context cannot recover from those, so from now on cuda_device_available()
// answers false, saying why, for the life of the process: `auto` runs on the
// CPU and `cuda` is refused with that reason. The first reason is kept.
void cuda_mark_unusable(const std::string& why);

namespace detail {
// Tests only: forgets cuda_mark_unusable() (the emulated device has no
// context to lose; a real one stays unusable).
void cuda_forget_unusable_for_tests();
}  // namespace detail

}  // namespace kvg
