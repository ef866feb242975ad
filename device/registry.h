/* device/registry.h: the kinds of device this build knows (registry.c), for device.c. */
#ifndef PT_DEVICE_REGISTRY_H
#define PT_DEVICE_REGISTRY_H

#include "device/device.h"

/* Every kind pipeline.device names, NULL-terminated, in the order auto prefers them (among
 * those picked_by_auto). A kind this build lacks is listed with its traits and an open that
 * says why it cannot. */
extern const pt_device_ops *const device_registry[];
/* The host: what device_current() is before device_select, and device_host(). */
extern const pt_device_ops device_cpu_ops;

#endif
