# The host libraries a trainer that mnemoc --emit=project writes links:
# nlohmann-json (required: checkpoints, safetensors, summaries), OpenBLAS
# (the CPU backend's GEMMs) and zlib (gzip-compressed IDX files). Each is
# looked for on the system, then in MNEMO_DEPS_DIR: Debian packages
# unpacked there with `dpkg-deb -x PACKAGE.deb DIR`, which is how
# scripts/gpu-check.sh brings them to a GPU machine that has only the CUDA
# toolkit, CMake and a C++ compiler (no third-party code is copied into the
# repository). Without OpenBLAS the trainer has no CPU backend and runs on
# the GPU only; without zlib it reads uncompressed IDX files only; both
# say so when asked for what they lack.
#
# CMAKE_DISABLE_FIND_PACKAGE_OpenBLAS, _ZLIB and _nlohmann_json hide the
# system's copy (MNEMO_DEPS_DIR is still searched): the test suite builds a
# project as a CUDA-only machine would.
#
#   mnemo_find_host_libraries()  sets MNEMO_HAVE_ONEDNN, MNEMO_DNNL_INCLUDE,
#                                MNEMO_HAVE_MPI, MNEMO_MPI_INCLUDE,
#                                MNEMO_HAVE_BLAS, MNEMO_BLAS_LIBRARY,
#                                MNEMO_CBLAS_INCLUDE, MNEMO_HAVE_ZLIB and
#                                MNEMO_HOST_LIBRARIES (what to link), and
#                                defines nlohmann_json::nlohmann_json

set(MNEMO_DEPS_DIR "" CACHE PATH
  "Debian packages unpacked with dpkg-deb -x: nlohmann-json3-dev, libopenblas0-pthread, libopenblas-pthread-dev, libgfortran5, libquadmath0, zlib1g, zlib1g-dev")

# A library found in MNEMO_DEPS_DIR must also load here (it was built for
# Debian 12's glibc): a trainer that cannot start is worse than one without
# a CPU backend. A tiny program calls `symbol`; `rpath` (optional) is where
# the library's own dependencies are.
function(mnemo_library_runs result library symbol)
  set(source ${CMAKE_CURRENT_BINARY_DIR}/mnemo-probe-${symbol}.cpp)
  file(WRITE ${source} "extern \"C\" void ${symbol}();\n"
    "int main() { return reinterpret_cast<void *>(&${symbol}) == nullptr; }\n")
  set(options "")
  if(ARGN)
    set(options "-Wl,--disable-new-dtags,-rpath,${ARGN}")
  endif()
  try_run(run_status compile_ok ${CMAKE_CURRENT_BINARY_DIR}/mnemo-probe-${symbol}
    ${source} LINK_LIBRARIES ${library} LINK_OPTIONS ${options}
    COMPILE_OUTPUT_VARIABLE compile_log RUN_OUTPUT_VARIABLE run_log)
  if(compile_ok AND run_status EQUAL 0)
    set(${result} ON PARENT_SCOPE)
  else()
    set(${result} OFF PARENT_SCOPE)
  endif()
endfunction()

# oneDNN and MPI, each optional; the compiler's own build of the runtime
# (runtime/CMakeLists.txt) finds them the same way. Sets MNEMO_HAVE_ONEDNN,
# MNEMO_DNNL_LIBRARY, MNEMO_DNNL_INCLUDE, MNEMO_HAVE_MPI, MNEMO_MPI_INCLUDE
# and MNEMO_MPI_LIBRARIES.
macro(mnemo_find_optional_libraries)
  # oneDNN (Debian's libdnnl-dev): the CPU convolutions' primitives
  # (lang/ops/convolution/ConvolutionSiteKernels.cpp); without it they run
  # im2col and sgemm. It needs the CPU backend. -DMNEMO_ONEDNN=OFF leaves
  # it out.
  option(MNEMO_ONEDNN "Use oneDNN for the CPU convolutions when found" ON)
  set(MNEMO_HAVE_ONEDNN OFF)
  if(MNEMO_ONEDNN AND MNEMO_HAVE_BLAS)
    find_library(MNEMO_DNNL_LIBRARY dnnl)
    find_path(MNEMO_DNNL_INCLUDE oneapi/dnnl/dnnl.h)
    if(MNEMO_DNNL_LIBRARY AND MNEMO_DNNL_INCLUDE)
      set(MNEMO_HAVE_ONEDNN ON)
      message(STATUS "Mnemo: oneDNN from ${MNEMO_DNNL_LIBRARY}")
    endif()
  endif()
  if(NOT MNEMO_HAVE_ONEDNN)
    set(MNEMO_DNNL_INCLUDE "")
    message(STATUS "Mnemo: no oneDNN (libdnnl-dev); the CPU convolutions "
      "run im2col")
  endif()
  # MPI (Debian's libopenmpi-dev): data parallelism under mpirun
  # (runtime/Ranks.cpp); without it the trainer runs as one process.
  # -DMNEMO_MPI=OFF leaves it out.
  option(MNEMO_MPI "Use MPI for data parallelism when found" ON)
  set(MNEMO_HAVE_MPI OFF)
  set(MNEMO_MPI_INCLUDE "")
  set(MNEMO_MPI_LIBRARIES "")
  if(MNEMO_MPI)
    find_package(MPI COMPONENTS C QUIET)
    if(MPI_C_FOUND)
      set(MNEMO_HAVE_MPI ON)
      set(MNEMO_MPI_INCLUDE ${MPI_C_INCLUDE_DIRS})
      set(MNEMO_MPI_LIBRARIES ${MPI_C_LIBRARIES})
      message(STATUS "Mnemo: MPI from ${MPI_C_LIBRARIES}")
    endif()
  endif()
  if(NOT MNEMO_HAVE_MPI)
    message(STATUS "Mnemo: no MPI (libopenmpi-dev); the trainer runs as one "
      "process")
  endif()
endmacro()

macro(mnemo_find_host_libraries)
  set(deps_lib "")
  set(deps_include "")
  if(MNEMO_DEPS_DIR)
    get_filename_component(deps ${MNEMO_DEPS_DIR} ABSOLUTE)
    foreach(dir usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu usr/lib
                usr/lib/x86_64-linux-gnu/openblas-pthread)
      list(APPEND deps_lib ${deps}/${dir})
    endforeach()
    set(deps_include ${deps}/usr/include
      ${deps}/usr/include/x86_64-linux-gnu/openblas-pthread)
  endif()
  set(MNEMO_HOST_LIBRARIES "")
  set(MNEMO_DEPS_RPATH "")

  # nlohmann-json: header-only.
  find_package(nlohmann_json 3 CONFIG QUIET)
  if(NOT nlohmann_json_FOUND)
    find_path(MNEMO_JSON_INCLUDE nlohmann/json.hpp PATHS ${deps_include}
      NO_DEFAULT_PATH)
    if(NOT MNEMO_JSON_INCLUDE)
      message(FATAL_ERROR "Mnemo: nlohmann-json not found: install "
        "nlohmann-json3-dev, or give -DMNEMO_DEPS_DIR=DIR with its Debian "
        "package unpacked there (dpkg-deb -x nlohmann-json3-dev_*.deb DIR)")
    endif()
    add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
    set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES ${MNEMO_JSON_INCLUDE})
    message(STATUS "Mnemo: nlohmann-json from ${MNEMO_JSON_INCLUDE}")
  endif()

  # zlib.
  set(MNEMO_HAVE_ZLIB OFF)
  find_package(ZLIB QUIET)
  if(ZLIB_FOUND)
    set(MNEMO_HAVE_ZLIB ON)
    list(APPEND MNEMO_HOST_LIBRARIES ZLIB::ZLIB)
  elseif(deps_lib)
    find_path(MNEMO_ZLIB_INCLUDE zlib.h PATHS ${deps_include} NO_DEFAULT_PATH)
    # libz.so.1 first: the -dev package's libz.so is an absolute link into
    # the system's /lib, which need not hold the same file elsewhere.
    find_library(MNEMO_ZLIB_LIBRARY NAMES libz.so.1 z PATHS ${deps_lib}
      NO_DEFAULT_PATH)
    if(MNEMO_ZLIB_INCLUDE AND MNEMO_ZLIB_LIBRARY)
      mnemo_library_runs(zlib_runs ${MNEMO_ZLIB_LIBRARY} zlibVersion)
      if(zlib_runs)
        set(MNEMO_HAVE_ZLIB ON)
        list(APPEND MNEMO_HOST_LIBRARIES ${MNEMO_ZLIB_LIBRARY})
        get_filename_component(dir ${MNEMO_ZLIB_LIBRARY} DIRECTORY)
        list(APPEND MNEMO_DEPS_RPATH ${dir})
        message(STATUS "Mnemo: zlib from ${MNEMO_ZLIB_LIBRARY}")
      endif()
    endif()
  endif()
  if(NOT MNEMO_HAVE_ZLIB)
    message(STATUS "Mnemo: no zlib; the trainer reads uncompressed IDX "
      "files only")
  endif()

  # OpenBLAS (Debian's pthread build; libgfortran5 and libquadmath0 beside
  # it when it comes from MNEMO_DEPS_DIR).
  set(MNEMO_HAVE_BLAS OFF)
  if(NOT CMAKE_DISABLE_FIND_PACKAGE_OpenBLAS)
    find_library(MNEMO_BLAS_LIBRARY openblas)
    find_path(MNEMO_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas)
  endif()
  if(MNEMO_BLAS_LIBRARY AND MNEMO_CBLAS_INCLUDE)
    set(MNEMO_HAVE_BLAS ON)
  elseif(deps_lib)
    unset(MNEMO_BLAS_LIBRARY CACHE)
    unset(MNEMO_CBLAS_INCLUDE CACHE)
    find_library(MNEMO_BLAS_LIBRARY NAMES openblas libopenblas.so.0
      PATHS ${deps_lib} NO_DEFAULT_PATH)
    find_path(MNEMO_CBLAS_INCLUDE cblas.h PATHS ${deps_include}
      NO_DEFAULT_PATH)
    if(MNEMO_BLAS_LIBRARY AND MNEMO_CBLAS_INCLUDE)
      # Its own dependencies are found through the trainer's RPATH (not
      # RUNPATH, which the loader does not use for a library's needs).
      get_filename_component(dir ${MNEMO_BLAS_LIBRARY} DIRECTORY)
      set(MNEMO_DEPS_RPATH ${MNEMO_DEPS_RPATH} ${dir} ${deps_lib})
      string(REPLACE ";" ":" rpath "${MNEMO_DEPS_RPATH}")
      mnemo_library_runs(blas_runs ${MNEMO_BLAS_LIBRARY}
        openblas_set_num_threads ${rpath})
      if(blas_runs)
        set(MNEMO_HAVE_BLAS ON)
        message(STATUS "Mnemo: OpenBLAS from ${MNEMO_BLAS_LIBRARY}")
      else()
        message(STATUS "Mnemo: the OpenBLAS in ${MNEMO_DEPS_DIR} does not "
          "load here")
      endif()
    endif()
  endif()
  if(MNEMO_HAVE_BLAS)
    list(APPEND MNEMO_HOST_LIBRARIES ${MNEMO_BLAS_LIBRARY})
  else()
    set(MNEMO_CBLAS_INCLUDE "")
    message(STATUS "Mnemo: no OpenBLAS; the trainer has no CPU backend and "
      "runs on the GPU only")
  endif()
  mnemo_find_optional_libraries()
  if(MNEMO_HAVE_ONEDNN)
    list(APPEND MNEMO_HOST_LIBRARIES ${MNEMO_DNNL_LIBRARY})
  endif()
  list(APPEND MNEMO_HOST_LIBRARIES ${MNEMO_MPI_LIBRARIES})
  if(MNEMO_DEPS_RPATH)
    list(REMOVE_DUPLICATES MNEMO_DEPS_RPATH)
    string(REPLACE ";" ":" rpath "${MNEMO_DEPS_RPATH}")
    list(APPEND MNEMO_HOST_LIBRARIES "-Wl,--disable-new-dtags,-rpath,${rpath}")
  endif()
endmacro()
