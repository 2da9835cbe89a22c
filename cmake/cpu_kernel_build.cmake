# One ISA's CPU kernels as one relocatable object (CMakeLists.txt): links OBJECTS with `ld -r`, makes every
# hidden symbol local (all but the build's entry point, which the kernel sources mark visible), and refuses
# static initializers, which would run at start-up on CPUs that cannot execute the build (sanitizer builds add
# their own and are let through: ALLOW_INITIALIZERS). Run with cmake -P.
set(partial "${OUTPUT}.partial")
# --force-group-allocation dissolves the COMDAT groups: the final link would otherwise keep one copy of each
# inline function or template across builds, and discard the others that local references still point to.
execute_process(COMMAND "${LINKER}" -r --force-group-allocation -o "${partial}" ${OBJECTS} RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "ld -r of the ${ISA} CPU kernels failed")
endif()
execute_process(COMMAND "${OBJCOPY}" --localize-hidden "${partial}" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "objcopy --localize-hidden of the ${ISA} CPU kernels failed")
endif()
execute_process(COMMAND "${READELF}" -S -W "${partial}" OUTPUT_VARIABLE sections RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "readelf of the ${ISA} CPU kernels failed")
endif()
if(sections MATCHES "\\.init_array|\\.ctors" AND NOT ALLOW_INITIALIZERS)
  execute_process(COMMAND "${READELF}" -r -W "${partial}" OUTPUT_VARIABLE relocations)
  string(REGEX MATCH "Relocation section '\\.rela\\.init_array'[^\n]*\n[^\n]*\n[^']*" initializers "${relocations}")
  file(REMOVE "${partial}")
  message(FATAL_ERROR "the ${ISA} CPU kernels have static initializers, which would run on every CPU at start-up; "
                      "make them constexpr or function-local statics:\n${initializers}")
endif()
file(RENAME "${partial}" "${OUTPUT}")
