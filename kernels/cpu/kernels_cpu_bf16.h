/* kernels/cpu/kernels_cpu_bf16.h: the CPU's bf16 table with its products in hardware
 * (kernels/cpu/kernels_cpu_bf16.c, oneDNN). Built only with oneDNN (PT_HAVE_DNNL); the registry,
 * kernels/cpu/kernels_cpu_precision.c, is the one caller. */
#ifndef PT_KERNELS_CPU_BF16_H
#define PT_KERNELS_CPU_BF16_H

#include "kernels/kernels.h"

/* The name of the instruction set the products use (onednn_bf16_isa), NULL when oneDNN has no
 * bf16 products on this CPU. */
const char *kernels_cpu_bf16_isa(void);
/* `emulated` (the bf16 table of rounded float32 copies) with its four linear entries replaced
 * by bf16 products accumulated in float32, and the weight_copy entry they read. */
pt_kernels kernels_cpu_bf16_make(const pt_kernels *emulated);

#endif
