# Checks that every #include of the simulator's layers points down:
#
#   model/sim  <-  model/*, rtl  <-  firmware  <-  host  <-  testbench
#
# Run as: cmake -DSOURCE_DIR=<source folder> -P check_layering.cmake
# Prints each include that reaches a layer above its file's, and fails if
# there is one.
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<source folder> -P check_layering.cmake")
endif()

# Layer: the folders of its files, then the include prefixes it must not use.
set(sim_dirs model/sim)
set(sim_forbidden model/packet/ model/pcie/ model/fabric/ model/hca/ rtl/ firmware/ host/ testbench/)
set(model_dirs model/packet model/pcie model/fabric model/hca rtl)
set(model_forbidden firmware/ host/ testbench/)
set(firmware_dirs firmware)
set(firmware_forbidden host/ testbench/)
set(host_dirs host)
set(host_forbidden testbench/)

set(violations 0)
foreach(layer sim model firmware host)
  set(files)
  foreach(dir IN LISTS ${layer}_dirs)
    file(GLOB_RECURSE found "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.hpp" "${SOURCE_DIR}/${dir}/*.cpp")
    list(APPEND files ${found})
  endforeach()
  foreach(f IN LISTS files)
    file(STRINGS "${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]*)[\">].*$" "\\1" header "${line}")
      foreach(prefix IN LISTS ${layer}_forbidden)
        string(FIND "${header}" "${prefix}" at)
        if(at EQUAL 0)
          file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
          message("${rel}: the ${layer} layer includes ${header}, from a layer above it")
          math(EXPR violations "${violations} + 1")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()

if(violations GREATER 0)
  message(FATAL_ERROR "${violations} include(s) point up the layers")
endif()
message("every include of model/sim, model, rtl, firmware and host points down")
