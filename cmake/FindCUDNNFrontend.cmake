# FindCUDNNFrontend: cuDNN 9 and the header-only cudnn-frontend C++ API over it, which
# kernels/cuda/attention_cudnn.cpp needs (docs/gpu.md, "Attention").
#
# cuDNN (cudnn.h, libcudnn) next to the CUDA toolkit (run find_package(CUDAToolkit) first), then
# under CUDNN_ROOT and the system paths. The frontend (cudnn_frontend.h) from
# CUDNN_FRONTEND_INCLUDE_DIR / $CUDNN_FRONTEND_INCLUDE_DIR, else the include/ folder the
# nvidia-cudnn-frontend wheel puts in site-packages of the venv scripts/install-python.sh makes
# (${PIPETRAIN_VENV:-~/.cache/pipetrain/venv}). Defines CUDNNFrontend_FOUND, CUDNN_VERSION,
# CUDNN_FRONTEND_VERSION, CUDNN_LIBRARY and the imported target CUDNN::frontend (its headers
# and cuDNN's as system headers, linking CUDNN_LIBRARY).
find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDNN_ROOT}/include)
find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDNN_ROOT}/lib)

set(_fe_venv "$ENV{PIPETRAIN_VENV}")
if(NOT _fe_venv)
  set(_fe_venv "$ENV{HOME}/.cache/pipetrain/venv")
endif()
file(GLOB _fe_hints "${_fe_venv}/lib/python3*/site-packages/include")
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
  HINTS ENV CUDNN_FRONTEND_INCLUDE_DIR ${_fe_hints})

foreach(_h cudnn_version.h:CUDNN:CUDNN_INCLUDE_DIR
           cudnn_frontend_version.h:CUDNN_FRONTEND:CUDNN_FRONTEND_INCLUDE_DIR)
  string(REPLACE ":" ";" _h "${_h}")
  list(GET _h 0 _file)
  list(GET _h 1 _prefix)
  list(GET _h 2 _dir)
  if(${_dir} AND EXISTS "${${_dir}}/${_file}")
    file(STRINGS "${${_dir}}/${_file}" _defs REGEX "^#define ${_prefix}_[A-Z]+(_VERSION)? +[0-9]+")
    set(_parts)
    foreach(_part MAJOR MINOR PATCH)
      string(REGEX MATCH "${_prefix}_${_part}[A-Z_]* +([0-9]+)" _m "${_defs}")
      list(APPEND _parts "${CMAKE_MATCH_1}")
    endforeach()
    string(REPLACE ";" "." ${_prefix}_VERSION "${_parts}")
  endif()
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNNFrontend
  REQUIRED_VARS CUDNN_FRONTEND_INCLUDE_DIR CUDNN_INCLUDE_DIR CUDNN_LIBRARY
  VERSION_VAR CUDNN_FRONTEND_VERSION)

if(CUDNNFrontend_FOUND AND NOT TARGET CUDNN::frontend)
  add_library(CUDNN::frontend INTERFACE IMPORTED)
  target_include_directories(CUDNN::frontend SYSTEM INTERFACE ${CUDNN_FRONTEND_INCLUDE_DIR}
                             ${CUDNN_INCLUDE_DIR})
  target_link_libraries(CUDNN::frontend INTERFACE ${CUDNN_LIBRARY})
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY CUDNN_FRONTEND_INCLUDE_DIR)
