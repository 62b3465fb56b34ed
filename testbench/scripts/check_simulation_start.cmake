# Checks that no source calls SystemC's sc_start but model/sim/simulation_start.cpp:
# the rest run the simulation through sim::start, which keeps AddressSanitizer's
# idea of the current stack right after a run (docs/architecture.md).
#
# Run as: cmake -DSOURCE_DIR=<source folder> -P check_simulation_start.cmake
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<source folder> -P check_simulation_start.cmake")
endif()

set(violations 0)
foreach(dir model rtl firmware host testbench)
  file(GLOB_RECURSE files "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.hpp" "${SOURCE_DIR}/${dir}/*.cpp")
  foreach(f IN LISTS files)
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
    if(rel STREQUAL "model/sim/simulation_start.cpp")
      continue()
    endif()
    # Calls only: a line whose code (before any // comment) names sc_start(.
    file(STRINGS "${f}" lines REGEX "sc_start[ \t]*\\(")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "//.*$" "" code "${line}")
      if(code MATCHES "(^|[^A-Za-z0-9_])sc_start[ \t]*\\(")
        message("${rel}: calls sc_start directly: ${line}")
        math(EXPR violations "${violations} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations GREATER 0)
  message(FATAL_ERROR "${violations} direct sc_start call(s): use sim::start (model/sim/simulation_start.hpp)")
endif()
message("every simulation runs through sim::start")
