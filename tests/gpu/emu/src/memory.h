/* tests/gpu/emu/src/memory.h: device memory is host memory here, so the emulator keeps a
 * registry of every live cudaMalloc (and cudaMallocHost) block and checks each pointer the
 * program hands over: a copy's direction against where its pointers point, a range against its
 * block's end, a kernel's pointer arguments against device memory (memory.cpp). */
#ifndef PT_EMU_MEMORY_H
#define PT_EMU_MEMORY_H

#include <cstddef>
#include <cstdint>

#include "internal.h"

namespace pt_emu {

struct block_info {
  uintptr_t base;
  size_t bytes;
  int device;  /* -1: pinned host memory (cudaMallocHost) */
  int managed; /* cudaMallocManaged: not counted against the device's memory (a GPU commits
                  its pages where they are first touched) */
  const char *file;
  int line;    /* where it was allocated */
};

/* The live block holding p, or nullptr (plain host memory, or not memory of this program). */
const block_info *find_block(const void *p);
/* [p, p + bytes) must lie in one live device block; otherwise the process ends with a message
 * naming what (e.g. "cudaMemcpy destination") and the caller's file and line. */
void require_device(const char *what, const void *p, size_t bytes, const char *file, int line);
/* p must not be device memory (a host pointer where the call says host). */
void require_host(const char *what, const void *p, const char *file, int line);

} // namespace pt_emu

#endif
