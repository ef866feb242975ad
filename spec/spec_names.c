/* spec/spec_names.c: how each enum setting is spelt in a spec. The order is the enum's, and
 * the order the "expected one of ..." errors list the names in. */
#include "spec/spec.h"

const char *const spec_loss_names[] = {"cross_entropy", "mse", NULL};
const char *const spec_data_format_names[] = {"bytes", "u16", "f32", "u32", NULL};

int spec_data_is_records(spec_data_format f) { return f == SPEC_DATA_F32; }
const char *const spec_data_order_names[] = {"sequential", "shuffled", NULL};
const char *const spec_optimizer_names[] = {"adamw", "sgd", NULL};
const char *const spec_lr_schedule_names[] = {"constant", "cosine", NULL};
const char *const spec_nonfinite_names[] = {"abort", "skip", NULL};
const char *const spec_precision_names[] = {"fp32", "tf32", "bf16", NULL};
const char *const spec_partition_names[] = {"parameters", "uniform", "balanced", "type:", "auto",
                                            NULL};
const char *const spec_device_names[] = {"auto", "cpu", "gpu", "emulated", NULL};
const char *const spec_comm_backend_names[] = {"auto", "nccl", "mpi", NULL};
const char *const spec_dp_reduce_names[] = {"chain", "allreduce", NULL};
