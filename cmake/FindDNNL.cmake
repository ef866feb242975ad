# Finds oneDNN's C API (Debian: libdnnl-dev), for the CPU's bf16 products in hardware.
# Defines the imported target DNNL::DNNL. (oneDNN's own CMake config also asks for OpenCL,
# which the C API here does not need.)
find_path(DNNL_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.h)
find_library(DNNL_LIBRARY NAMES dnnl)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DNNL REQUIRED_VARS DNNL_LIBRARY DNNL_INCLUDE_DIR)
if(DNNL_FOUND AND NOT TARGET DNNL::DNNL)
  add_library(DNNL::DNNL UNKNOWN IMPORTED)
  set_target_properties(DNNL::DNNL PROPERTIES
    IMPORTED_LOCATION "${DNNL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
endif()
