/* tests/gpu/emu/nccl/src/reduce.c: the reductions, always in rank order, ((x0 op x1) op x2) ...,
 * so every rank and every run gets the same bits (NCCL's own order depends on its algorithm;
 * a fixed one is what a test can compare against). ncclAvg: the sum divided by the rank count. */
#include "internal.h"

#define COMBINE(op, a, b)                                           \
  ((op) == ncclSum || (op) == ncclAvg ? (a) + (b)                   \
   : (op) == ncclProd                 ? (a) * (b)                   \
   : (op) == ncclMax                  ? ((b) > (a) ? (b) : (a))     \
                                      : ((b) < (a) ? (b) : (a)))

#define DEFINE_REDUCE(name, T)                                                             \
  static void name(void *dst, const unsigned char *src, int n, size_t count, ncclRedOp_t op) { \
    const T *x = (const T *)(const void *)src;                                             \
    T *d = dst;                                                                            \
    for (size_t i = 0; i < count; i++) {                                                   \
      T acc = x[i];                                                                        \
      for (int r = 1; r < n; r++) acc = (T)COMBINE(op, acc, x[(size_t)r * count + i]);     \
      d[i] = op == ncclAvg ? (T)(acc / (T)n) : acc;                                        \
    }                                                                                      \
  }

DEFINE_REDUCE(reduce_i8, int8_t)
DEFINE_REDUCE(reduce_u8, uint8_t)
DEFINE_REDUCE(reduce_i32, int32_t)
DEFINE_REDUCE(reduce_u32, uint32_t)
DEFINE_REDUCE(reduce_i64, int64_t)
DEFINE_REDUCE(reduce_u64, uint64_t)
DEFINE_REDUCE(reduce_f32, float)
DEFINE_REDUCE(reduce_f64, double)

void emu_reduce(void *dst, const unsigned char *src, int n, size_t count, ncclDataType_t t,
                ncclRedOp_t op) {
  switch (t) {
  case ncclInt8: reduce_i8(dst, src, n, count, op); break;
  case ncclUint8: reduce_u8(dst, src, n, count, op); break;
  case ncclInt32: reduce_i32(dst, src, n, count, op); break;
  case ncclUint32: reduce_u32(dst, src, n, count, op); break;
  case ncclInt64: reduce_i64(dst, src, n, count, op); break;
  case ncclUint64: reduce_u64(dst, src, n, count, op); break;
  case ncclFloat32: reduce_f32(dst, src, n, count, op); break;
  case ncclFloat64: reduce_f64(dst, src, n, count, op); break;
  default: emu_die("a reduction of datatype %d (refused when issued)", (int)t);
  }
}
