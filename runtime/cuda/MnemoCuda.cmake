# The runtime's CUDA backend, for the project's own build and for the
# source trees mnemoc --emit=project writes (which copy this file).
#
#   mnemo_find_cuda()                 sets MNEMO_CUDA_FOUND and says why not
#   mnemo_enable_cuda()               enables nvcc (in directory scope)
#   mnemo_add_cuda_library(NAME DIR)  a static library of DIR/cuda/*: the
#                                     CUDA executor (nvcc), NVRTC and the
#                                     embedded kernel library
#
# Needs the CUDA toolkit (nvcc, cudart, NVRTC, cuBLASLt) and cuDNN, from the
# toolkit's folders or from PyTorch's pip packages (site-packages/nvidia/).
# NCCL, found the same way, is optional: without it a data-parallel trainer
# refuses to run on GPUs (MNEMO_NCCL_LIBRARY, MNEMO_HAVE_NCCL).

macro(mnemo_find_cuda)
  set(MNEMO_CUDA_FOUND OFF)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    mnemo_find_cuda_parts()
  else()
    message(STATUS "Mnemo: no CUDA toolkit; the trainer runs on the CPU only")
  endif()
endmacro()

# The parts beyond the toolkit (a macro, so that what it finds is visible to
# the caller; "return" would leave the caller's scope, hence the flag).
#
# cuDNN (and NCCL, the same way) is looked for, in this order, and the
# configure log says where it was found: CUDNN_ROOT (NCCL_ROOT; a CMake or
# environment variable), the toolkit's folders, the pip package
# nvidia-cudnn (nvidia-nccl) in PyTorch's virtual environment
# (/opt/torch/.venv, or VIRTUAL_ENV), then in the site-packages of every
# python3 on the PATH and of the Python CMake finds. A GPU machine whose
# python3 is not the one with PyTorch still finds the venv's cuDNN.
macro(mnemo_find_cuda_parts)
  # The site-packages are searched only for what is not known yet (a
  # project that reuses another's runtime build knows both).
  set(sites "")
  if(NOT MNEMO_CUDNN_LIBRARY OR NOT MNEMO_NCCL_LIBRARY)
    mnemo_python_sites(sites)
  endif()
  mnemo_library_roots(cudnn_roots CUDNN_ROOT cudnn cu13)
  mnemo_library_roots(nccl_roots NCCL_ROOT nccl cu13)
  mnemo_find_in_roots(MNEMO_CUDNN "cudnn;libcudnn.so.9" cudnn.h
    "${cudnn_roots}")
  mnemo_find_in_roots(MNEMO_NCCL "nccl;libnccl.so.2" nccl.h "${nccl_roots}")
  if(NOT MNEMO_CUDNN_LIBRARY)
    string(REPLACE ";" ", " searched "${cudnn_roots}")
    message(STATUS "Mnemo: cuDNN not found (searched ${searched}; set "
      "CUDNN_ROOT)")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT MNEMO_CUDNN_LIBRARY OR NOT MNEMO_CUDNN_INCLUDE OR NOT TARGET CUDA::cublasLt
     OR NOT TARGET CUDA::nvrtc)
    message(STATUS "Mnemo: CUDA ${CUDAToolkit_VERSION} found but cuDNN "
      "(${MNEMO_CUDNN_LIBRARY}, ${MNEMO_CUDNN_INCLUDE}), cuBLASLt or NVRTC "
      "is missing; the trainer runs on the CPU only")
  elseif(NOT CMAKE_CUDA_COMPILER)
    message(STATUS "Mnemo: no working nvcc; the trainer runs on the CPU only")
  else()
    message(STATUS "Mnemo: CUDA ${CUDAToolkit_VERSION} "
      "(${CUDAToolkit_INCLUDE_DIRS}), cuDNN ${MNEMO_CUDNN_LIBRARY}")
    if(MNEMO_NCCL_LIBRARY)
      message(STATUS "Mnemo: NCCL ${MNEMO_NCCL_LIBRARY}")
    else()
      string(REPLACE ";" ", " searched "${nccl_roots}")
      message(STATUS "Mnemo: NCCL not found (searched ${searched}; set "
        "NCCL_ROOT): data-parallel trainers run on the CPU only")
    endif()
    set(MNEMO_CUDA_FOUND ON)
  endif()
endmacro()

# OUT: the site-packages folders to look for pip's nvidia/ packages in.
function(mnemo_python_sites out)
  set(sites "")
  foreach(venv "$ENV{VIRTUAL_ENV}" /opt/torch/.venv)
    if(venv)
      file(GLOB venv_sites ${venv}/lib/python3*/site-packages)
      list(APPEND sites ${venv_sites})
    endif()
  endforeach()
  find_program(MNEMO_PATH_PYTHON3 python3)
  find_package(Python3 QUIET COMPONENTS Interpreter)
  foreach(python ${MNEMO_PATH_PYTHON3} ${Python3_EXECUTABLE})
    execute_process(
      COMMAND ${python} -c
        "import sysconfig; print(sysconfig.get_paths()['purelib'])"
      OUTPUT_VARIABLE site OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(site)
      list(APPEND sites ${site})
    endif()
  endforeach()
  set(${out} ${sites} PARENT_SCOPE)
endfunction()

# OUT: where to look for a library: the folder in ROOT_VARIABLE (a CMake or
# an environment variable), the toolkit's folders, then nvidia/SUBDIR of
# each site-packages in `sites` for each SUBDIR given after it.
macro(mnemo_library_roots out root_variable)
  set(${out} "")
  foreach(root "${${root_variable}}" "$ENV{${root_variable}}")
    if(root)
      list(APPEND ${out} ${root})
    endif()
  endforeach()
  list(APPEND ${out} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
  foreach(site ${sites})
    foreach(subdir ${ARGN})
      list(APPEND ${out} ${site}/nvidia/${subdir})
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES ${out})
endmacro()

# PREFIX_LIBRARY and PREFIX_INCLUDE (cached): the first of `roots` that has
# one of `names` and `header`; unset when none has both.
macro(mnemo_find_in_roots prefix names header roots)
  if(NOT ${prefix}_LIBRARY OR NOT ${prefix}_INCLUDE)
    unset(${prefix}_LIBRARY CACHE)
    unset(${prefix}_INCLUDE CACHE)
    foreach(root ${roots})
      find_library(${prefix}_LIBRARY NAMES ${names}
        PATHS ${root} PATH_SUFFIXES lib64 lib lib/x64 NO_DEFAULT_PATH)
      find_path(${prefix}_INCLUDE ${header} PATHS ${root}
        PATH_SUFFIXES include NO_DEFAULT_PATH)
      if(${prefix}_LIBRARY AND ${prefix}_INCLUDE)
        break()
      endif()
      unset(${prefix}_LIBRARY CACHE)
      unset(${prefix}_INCLUDE CACHE)
    endforeach()
  endif()
endmacro()

# Call from the directory that creates the library (enable_language must
# run in directory scope, not in a function).
macro(mnemo_enable_cuda)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    # Host code only: the kernels are compiled by NVRTC at run time.
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
endmacro()

function(mnemo_add_cuda_library name runtime_dir)
  # The kernel library, embedded as a string for NVRTC. configure_file
  # makes CMake re-run (and re-embed) when the header changes.
  configure_file(${runtime_dir}/cuda/Kernels.cuh
    ${CMAKE_CURRENT_BINARY_DIR}/${name}/Kernels.cuh COPYONLY)
  file(READ ${runtime_dir}/cuda/Kernels.cuh kernels)
  # The op families' device functions (lang/ops/FAMILY/*.cuh), which a
  # model's kernels include by path where they use them, and the formulas
  # (lang/ops/FAMILY/*Formulas.h, include-free): NVRTC gets each as a header
  # of that name. It sees the kernel library as one header: the formulas
  # that it includes are spliced in (and skipped by their include guards
  # where a family's header includes them again).
  get_filename_component(root ${runtime_dir} DIRECTORY)
  file(GLOB family_kernels ${root}/lang/ops/*/*.cuh
       ${root}/lang/ops/*/*Formulas.h)
  set(family_names "")
  set(family_sources "")
  foreach(header ${family_kernels})
    file(RELATIVE_PATH relative ${root} ${header})
    get_filename_component(header_name ${header} NAME)
    configure_file(${header}
      ${CMAKE_CURRENT_BINARY_DIR}/${name}/${header_name} COPYONLY)
    file(READ ${header} header_text)
    string(REPLACE "#include \"${relative}\"" "${header_text}"
      kernels "${kernels}")
    string(APPEND family_names "\"${relative}\", ")
    string(APPEND family_sources "R\"mnemo(${header_text})mnemo\", ")
  endforeach()
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/${name}/KernelLibrary.cpp
    "// Generated from runtime/cuda/Kernels.cuh and lang/ops/*/*.cuh by MnemoCuda.cmake.\n"
    "#include \"runtime/cuda/Nvrtc.h\"\n"
    "const char *const mnemo::cuda::kKernelLibrary = R\"mnemo(${kernels})mnemo\";\n"
    "const char *const mnemo::cuda::kFamilyKernelNames[] = {${family_names}nullptr};\n"
    "const char *const mnemo::cuda::kFamilyKernelSources[] = {${family_sources}nullptr};\n")
  # The op families' host code over CUDA libraries, which the executor
  # calls (lang/ops/FAMILY/*Cudnn.cpp: attention through cuDNN's graph API).
  file(GLOB family_library_sources ${root}/lang/ops/*/*Cudnn.cpp)
  add_library(${name} STATIC
    ${runtime_dir}/cuda/CudaExecutor.cu
    ${runtime_dir}/cuda/Nvrtc.cpp
    ${family_library_sources}
    ${CMAKE_CURRENT_BINARY_DIR}/${name}/KernelLibrary.cpp)
  target_include_directories(${name} PUBLIC ${root}
    PRIVATE ${MNEMO_CUDNN_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
  # The shared CUDA runtime, and the libraries by file: CMake's CUDA::nvrtc
  # would add the driver's stub, and a trainer must start (and run on the
  # CPU) where no driver is installed. The executor reaches the driver
  # through cudart instead.
  set_target_properties(${name} PROPERTIES CUDA_STANDARD 17
    CUDA_STANDARD_REQUIRED ON POSITION_INDEPENDENT_CODE ON
    CUDA_RUNTIME_LIBRARY Shared)
  list(GET CUDAToolkit_INCLUDE_DIRS 0 cuda_include)
  target_compile_definitions(${name} PRIVATE
    MNEMO_CUDA_INCLUDE="${cuda_include}")
  if(MNEMO_NCCL_LIBRARY AND MNEMO_NCCL_INCLUDE)
    target_include_directories(${name} PRIVATE ${MNEMO_NCCL_INCLUDE})
    target_compile_definitions(${name} PRIVATE MNEMO_HAVE_NCCL=1)
  endif()
  mnemo_cuda_link_items(link_items)
  target_link_libraries(${name} PUBLIC ${link_items})
  # What a program that links the library by file needs besides it (mnemoc
  # links generated trainers so).
  set(${name}_LINK_ITEMS ${link_items} PARENT_SCOPE)
endfunction()

# OUT: what a program that links the CUDA library needs besides it: the
# libraries by file and the folders to find them in at run time (also for
# a project that links another project's build of the library,
# runtime/MnemoProject.cmake).
function(mnemo_cuda_link_items out)
  get_filename_component(cudnn_dir ${MNEMO_CUDNN_LIBRARY} DIRECTORY)
  set(link_items ${CUDA_cudart_LIBRARY} ${CUDA_nvrtc_LIBRARY}
    ${CUDA_cublasLt_LIBRARY} ${MNEMO_CUDNN_LIBRARY}
    -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR} -Wl,-rpath,${cudnn_dir})
  if(MNEMO_NCCL_LIBRARY AND MNEMO_NCCL_INCLUDE)
    get_filename_component(nccl_dir ${MNEMO_NCCL_LIBRARY} DIRECTORY)
    list(APPEND link_items ${MNEMO_NCCL_LIBRARY} -Wl,-rpath,${nccl_dir})
  endif()
  set(${out} ${link_items} PARENT_SCOPE)
endfunction()
