# Compiler warnings shared by every first-party target.
function(flotilla_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
  if(FLOTILLA_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()

# flotilla_library(NAME SOURCES ... DEPS ... [PRIVATE_DEPS ...])
# One component = one library; public headers live in <dir>/include/flotilla/<component>/.
function(flotilla_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                     PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  flotilla_warnings(${name})
endfunction()

# flotilla_test(NAME LABELS unit|integration|e2e|gpu|attack SOURCES ... DEPS ... [TIMEOUT s] [RUN_SERIAL])
function(flotilla_test name)
  cmake_parse_arguments(ARG "RUN_SERIAL" "TIMEOUT" "LABELS;SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  flotilla_warnings(${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                       ENVIRONMENT "FLOTILLA_SOURCE_DIR=${PROJECT_SOURCE_DIR};FLOTILLA_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(ARG_RUN_SERIAL)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
