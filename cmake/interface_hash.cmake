# Writes OUTPUT, a header defining DTRAIN_CUDA_INTERFACE_HASH: the SHA-256 of every header under SOURCE_DIR/core,
# which the executable and the CUDA backend library both compile in, so that a library built against other core
# headers is refused at load (core/kernels/cuda/cuda_backend.hpp). Rewritten only when the hash changes.
# Usage: cmake -DSOURCE_DIR=... -DOUTPUT=... -P interface_hash.cmake
file(GLOB_RECURSE headers RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/core/*.hpp")
list(SORT headers)
set(contents "")
foreach(header IN LISTS headers)
  file(READ "${SOURCE_DIR}/${header}" text)
  string(APPEND contents "${header}\n${text}")
endforeach()
string(SHA256 hash "${contents}")
set(text "#pragma once\n#define DTRAIN_CUDA_INTERFACE_HASH \"${hash}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${text}")
