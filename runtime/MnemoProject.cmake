# The build of a source tree that mnemoc --emit=project writes (its
# CMakeLists.txt includes this file and calls mnemo_project):
#
#   mnemo_project(PROGRAM)   PROGRAM (train, or infer for --mode=inference)
#                            from the model's generated code (model.cpp,
#                            and model_cuda.cpp with the CUDA backend), the
#                            program's main (runtime/Trainer.cpp or
#                            runtime/Infer.cpp) and the runtime
#
# The runtime does not depend on the model: every project one mnemoc writes
# carries the same runtime/ and lang/ops/ files. It is built as static
# libraries (mnemo_runtime, mnemo_cuda, mnemo_PROGRAM_main), so that several
# projects can share one build of it: -DMNEMO_RUNTIME_FROM=DIR links the
# libraries already built in DIR, another project's build folder, and
# compiles only this project's model code (scripts/gpu-check.sh builds a
# dozen trainers so). DIR must have been configured from the same runtime
# sources with the same compiler, libraries and options: a fingerprint of
# those (DIR/mnemo-runtime.id) is compared at configure time, and a DIR that
# differs is refused with a message rather than linked into a trainer whose
# runtime does not match its headers.

set(MNEMO_RUNTIME_FROM "" CACHE PATH
  "Build folder of another project from the same runtime whose runtime libraries to link instead of building them")

macro(mnemo_project program)
  set(CMAKE_CXX_STANDARD 17)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  if(NOT CMAKE_BUILD_TYPE)
    set(CMAKE_BUILD_TYPE Release CACHE STRING "" FORCE)
  endif()
  # Kernels for the CPU that builds: turn off to build for any x86-64.
  option(MNEMO_NATIVE "Build with -march=native" ON)
  set(mnemo_root ${CMAKE_CURRENT_SOURCE_DIR})
  if("${program}" STREQUAL "infer")
    set(mnemo_main ${mnemo_root}/runtime/Infer.cpp)
  else()
    set(mnemo_main ${mnemo_root}/runtime/Trainer.cpp)
  endif()

  find_package(Threads REQUIRED)
  include(${mnemo_root}/runtime/MnemoHostLibraries.cmake)
  mnemo_find_host_libraries()

  # The CUDA backend when the toolkit and cuDNN are here.
  include(${mnemo_root}/runtime/cuda/MnemoCuda.cmake)
  option(MNEMO_CUDA "Build the CUDA backend when the toolkit is found" ON)
  set(MNEMO_CUDA_FOUND OFF)
  if(MNEMO_CUDA)
    if(MNEMO_RUNTIME_FROM)
      mnemo_cuda_from_runtime_build()
    endif()
    mnemo_find_cuda()
  endif()
  # nvcc compiles the CUDA library's sources only: a project that links
  # another's build of it compiles none, and skips nvcc's detection.
  if(MNEMO_CUDA_FOUND AND NOT MNEMO_RUNTIME_FROM)
    mnemo_enable_cuda()
  elseif(NOT MNEMO_CUDA_FOUND AND NOT MNEMO_HAVE_BLAS)
    message(FATAL_ERROR "Mnemo: neither OpenBLAS (the CPU backend) nor the "
      "CUDA toolkit with cuDNN (the GPU backend) was found: the trainer "
      "would have no device to run on")
  endif()

  # What the runtime's C++ and the model's code compile and link with (the
  # CUDA library's nvcc sources have their own settings).
  add_library(mnemo_settings INTERFACE)
  target_include_directories(mnemo_settings INTERFACE ${mnemo_root}
    ${MNEMO_CBLAS_INCLUDE} ${MNEMO_DNNL_INCLUDE} ${MNEMO_MPI_INCLUDE})
  target_compile_definitions(mnemo_settings INTERFACE
    MNEMO_HAVE_BLAS=$<BOOL:${MNEMO_HAVE_BLAS}>
    MNEMO_HAVE_ZLIB=$<BOOL:${MNEMO_HAVE_ZLIB}>
    MNEMO_HAVE_ONEDNN=$<BOOL:${MNEMO_HAVE_ONEDNN}>
    MNEMO_HAVE_MPI=$<BOOL:${MNEMO_HAVE_MPI}>)
  # -ffp-contract=off: one rounding per float operation, as the runtime
  # that mnemoc links (runtime/CMakeLists.txt) and PyTorch's tensor ops.
  target_compile_options(mnemo_settings INTERFACE
    -O3 -fno-math-errno -ffp-contract=off)
  if(MNEMO_NATIVE)
    target_compile_options(mnemo_settings INTERFACE -march=native)
  endif()
  target_link_libraries(mnemo_settings INTERFACE ${MNEMO_HOST_LIBRARIES}
    nlohmann_json::nlohmann_json Threads::Threads)

  mnemo_runtime_fingerprint(mnemo_fingerprint)
  if(MNEMO_RUNTIME_FROM)
    mnemo_import_runtime(${program})
  else()
    mnemo_build_runtime(${program})
  endif()

  add_executable(${program} model.cpp)
  if(MNEMO_CUDA_FOUND)
    target_sources(${program} PRIVATE model_cuda.cpp)
    add_executable(mnemo-nvrtc runtime/cuda/CompileKernels.cpp)
    target_include_directories(mnemo-nvrtc PRIVATE ${mnemo_root})
    target_link_libraries(mnemo-nvrtc PRIVATE mnemo_cuda)
  else()
    target_sources(${program} PRIVATE runtime/NoCuda.cpp)
  endif()
  # The main first, then the runtime it calls; the CUDA executor and the
  # runtime call each other, so the runtime is named again after it.
  target_link_libraries(${program} PRIVATE mnemo_settings
    mnemo_${program}_main mnemo_runtime)
  if(MNEMO_CUDA_FOUND)
    target_link_libraries(${program} PRIVATE mnemo_cuda mnemo_runtime)
  endif()
endmacro()

# OUT: what a build of the runtime depends on besides this project's model:
# every runtime/ and lang/ops/ file's hash, the compilers, the libraries
# found and the options. Two projects with the same fingerprint build
# identical runtime libraries.
function(mnemo_runtime_fingerprint out)
  file(GLOB_RECURSE files RELATIVE ${mnemo_root}
    ${mnemo_root}/runtime/* ${mnemo_root}/lang/ops/*)
  list(SORT files)
  set(text "")
  foreach(file ${files})
    file(SHA256 ${mnemo_root}/${file} hash)
    string(APPEND text "${file} ${hash}\n")
  endforeach()
  string(APPEND text
    "c++ ${CMAKE_CXX_COMPILER} ${CMAKE_CXX_COMPILER_VERSION} ${CMAKE_BUILD_TYPE}\n"
    "native ${MNEMO_NATIVE}\n"
    "libraries ${MNEMO_HOST_LIBRARIES} ${MNEMO_CBLAS_INCLUDE} ${MNEMO_DNNL_INCLUDE} ${MNEMO_MPI_INCLUDE}\n"
    "have blas=${MNEMO_HAVE_BLAS} zlib=${MNEMO_HAVE_ZLIB} onednn=${MNEMO_HAVE_ONEDNN} mpi=${MNEMO_HAVE_MPI}\n"
    "cuda ${MNEMO_CUDA_FOUND}")
  if(MNEMO_CUDA_FOUND)
    string(APPEND text " ${CMAKE_CUDA_COMPILER} ${CUDAToolkit_VERSION}"
      " ${MNEMO_CUDNN_LIBRARY} ${MNEMO_NCCL_LIBRARY}")
  endif()
  set(${out} "${text}\n" PARENT_SCOPE)
endfunction()

# Where the runtime build in MNEMO_RUNTIME_FROM found nvcc, cuDNN and NCCL
# (its cache), so that mnemo_find_cuda does not search again (nvcc's check
# and the site-packages' are most of a configure's time). The fingerprint
# still compares what was found.
macro(mnemo_cuda_from_runtime_build)
  load_cache(${MNEMO_RUNTIME_FROM} READ_WITH_PREFIX mnemo_from_
    CMAKE_CUDA_COMPILER MNEMO_CUDNN_LIBRARY MNEMO_CUDNN_INCLUDE
    MNEMO_NCCL_LIBRARY MNEMO_NCCL_INCLUDE)
  foreach(entry CMAKE_CUDA_COMPILER MNEMO_CUDNN_LIBRARY MNEMO_CUDNN_INCLUDE
                MNEMO_NCCL_LIBRARY MNEMO_NCCL_INCLUDE)
    if(mnemo_from_${entry} AND NOT ${entry})
      set(${entry} ${mnemo_from_${entry}} CACHE FILEPATH "" FORCE)
    endif()
  endforeach()
endmacro()

# The runtime's libraries, built here; the fingerprint and the program whose
# main was built are written beside them for projects that reuse them.
macro(mnemo_build_runtime program)
  file(GLOB mnemo_runtime_sources
    ${mnemo_root}/runtime/*.cpp
    ${mnemo_root}/runtime/cpu/*.cpp
    ${mnemo_root}/lang/ops/*/*Kernels.cpp)
  list(REMOVE_ITEM mnemo_runtime_sources
    ${mnemo_root}/runtime/NoCuda.cpp
    ${mnemo_root}/runtime/Trainer.cpp
    ${mnemo_root}/runtime/Infer.cpp)
  add_library(mnemo_runtime STATIC ${mnemo_runtime_sources})
  target_link_libraries(mnemo_runtime PRIVATE mnemo_settings)
  add_library(mnemo_${program}_main STATIC ${mnemo_main})
  target_link_libraries(mnemo_${program}_main PRIVATE mnemo_settings)
  if(MNEMO_CUDA_FOUND)
    mnemo_add_cuda_library(mnemo_cuda ${mnemo_root}/runtime)
  endif()
  file(WRITE ${CMAKE_BINARY_DIR}/mnemo-runtime.id "${mnemo_fingerprint}")
  file(WRITE ${CMAKE_BINARY_DIR}/mnemo-runtime.main "${program}\n")
endmacro()

# The runtime's libraries from MNEMO_RUNTIME_FROM, after checking that they
# were built from what this project would build them from. The main is
# compiled here when that build made the other program's.
macro(mnemo_import_runtime program)
  get_filename_component(mnemo_from ${MNEMO_RUNTIME_FROM} ABSOLUTE)
  if(NOT EXISTS ${mnemo_from}/mnemo-runtime.id)
    message(FATAL_ERROR "Mnemo: MNEMO_RUNTIME_FROM=${MNEMO_RUNTIME_FROM} is "
      "not the build folder of a project mnemoc wrote (no mnemo-runtime.id "
      "there): configure that project first, or leave MNEMO_RUNTIME_FROM "
      "empty to build this project's own runtime")
  endif()
  file(READ ${mnemo_from}/mnemo-runtime.id theirs)
  if(NOT theirs STREQUAL mnemo_fingerprint)
    file(WRITE ${CMAKE_BINARY_DIR}/mnemo-runtime.id "${mnemo_fingerprint}")
    message(FATAL_ERROR "Mnemo: MNEMO_RUNTIME_FROM=${MNEMO_RUNTIME_FROM} was "
      "configured from other runtime sources, compilers, libraries or "
      "options than this project (compare ${mnemo_from}/mnemo-runtime.id "
      "with ${CMAKE_BINARY_DIR}/mnemo-runtime.id): leave MNEMO_RUNTIME_FROM "
      "empty to build this project's own runtime")
  endif()
  add_library(mnemo_runtime STATIC IMPORTED)
  set_target_properties(mnemo_runtime PROPERTIES
    IMPORTED_LOCATION ${mnemo_from}/libmnemo_runtime.a)
  target_link_libraries(mnemo_runtime INTERFACE mnemo_settings)
  file(READ ${mnemo_from}/mnemo-runtime.main their_main)
  if(their_main STREQUAL "${program}\n")
    add_library(mnemo_${program}_main STATIC IMPORTED)
    set_target_properties(mnemo_${program}_main PROPERTIES
      IMPORTED_LOCATION ${mnemo_from}/libmnemo_${program}_main.a)
  else()
    add_library(mnemo_${program}_main STATIC ${mnemo_main})
    target_link_libraries(mnemo_${program}_main PRIVATE mnemo_settings)
  endif()
  if(MNEMO_CUDA_FOUND)
    add_library(mnemo_cuda STATIC IMPORTED)
    mnemo_cuda_link_items(mnemo_cuda_link)
    set_target_properties(mnemo_cuda PROPERTIES
      IMPORTED_LOCATION ${mnemo_from}/libmnemo_cuda.a)
    target_link_libraries(mnemo_cuda INTERFACE ${mnemo_cuda_link})
  endif()
  message(STATUS "Mnemo: the runtime's libraries from ${mnemo_from}")
endmacro()
