#pragma once
// The C library's allocator, set for a training loop (called once by Session::Join, so the
// built-in workers and the Python front end's get the same).
//
// A training iteration allocates and frees the same activations and gradients again and
// again (tens of MiB for a small CNN). glibc's defaults adapt its thresholds to the process's
// history: depending on which large blocks the process freed before training (a dataset read
// and converted, gRPC buffers), the heap top can be given back to the kernel (brk) at the end
// of every iteration and faulted in, page by page and zeroed, at the next. Measured on
// Fashion-MNIST's CNN through herd.torch: up to 2000 page faults and +10 ms of CPU per
// iteration (27 -> 37 ms), differing from run to run and worker to worker. Fixed thresholds
// keep that memory in the process: blocks up to 32 MiB come from the heap, and up to 128 MiB
// free at its top is kept.
//
// A process whose user set glibc's malloc settings (GLIBC_TUNABLES with glibc.malloc.*, or
// the MALLOC_*_ variables) keeps them: herd changes nothing then.

#include <string>

namespace herd::worker {

// Applies the settings above once per process (later calls do nothing). Returns what it did,
// for the log: "" when it changed nothing.
std::string KeepTrainingMemory();

// Whether this process's environment sets glibc's malloc parameters (then herd keeps them).
bool UserChoseMallocSettings();

}  // namespace herd::worker
