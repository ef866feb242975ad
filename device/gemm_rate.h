/* device/gemm_rate.h: the machine's sgemm rate, the yardstick for time estimates and MFU. */
#ifndef PT_GEMM_RATE_H
#define PT_GEMM_RATE_H

/* FLOP/s of OpenBLAS sgemm on n x n x n (n = 1024 for a full measurement) over about
 * `seconds`, with whatever thread count OpenBLAS currently uses. */
double gemm_measure_flops(int n, double seconds);

#endif
