# Finds OpenBLAS with its CBLAS interface (Debian: libopenblas-dev).
# Defines the imported target OpenBLASC::OpenBLASC.
find_path(OpenBLASC_INCLUDE_DIR NAMES cblas.h
  PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread openblas-pthread)
find_library(OpenBLASC_LIBRARY NAMES openblas)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLASC REQUIRED_VARS OpenBLASC_LIBRARY OpenBLASC_INCLUDE_DIR)
if(OpenBLASC_FOUND AND NOT TARGET OpenBLASC::OpenBLASC)
  add_library(OpenBLASC::OpenBLASC UNKNOWN IMPORTED)
  set_target_properties(OpenBLASC::OpenBLASC PROPERTIES
    IMPORTED_LOCATION "${OpenBLASC_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${OpenBLASC_INCLUDE_DIR}")
endif()
