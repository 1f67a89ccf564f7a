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

# flotilla_link_archives(TARGET LIBS first-party-libraries... [KEEP_TARGETS targets...])
# Links TARGET with the first-party static libraries' archives and every third-party C or C++
# dependency they have from its static archive (absl, libbpf, libelf, zlib, libseccomp,
# yaml-cpp, libcrypto), leaving only libstdc++, libc, spdlog and fmt as shared objects. A
# process that starts often (the small `flotilla` binary) then maps six shared objects instead
# of forty: the dynamic loader's work was the largest part of starting it. KEEP_TARGETS are
# linked as they are (header-only or shared: CLI11, spdlog). Where the system lacks one of the
# archives the target links the usual way.
function(flotilla_link_archives target)
  cmake_parse_arguments(ARG "" "" "LIBS;KEEP_TARGETS" ${ARGN})
  set(libdir /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
  file(GLOB absl_archives ${libdir}/libabsl_*.a)
  set(archives)
  set(missing)
  foreach(name bpf elf z seccomp yaml-cpp crypto)
    if(EXISTS ${libdir}/lib${name}.a)
      list(APPEND archives ${libdir}/lib${name}.a)
    else()
      list(APPEND missing ${name})
    endif()
  endforeach()
  find_library(FLOTILLA_ZSTD_LIB NAMES zstd libzstd.so.1)  # libelf's compression
  if(NOT absl_archives OR missing OR NOT FLOTILLA_ZSTD_LIB)
    message(STATUS "${target}: static archives missing (${missing}); linking shared libraries")
    target_link_libraries(${target} PRIVATE ${ARG_LIBS} ${ARG_KEEP_TARGETS})
    return()
  endif()
  set(first_party)
  foreach(lib ${ARG_LIBS})
    target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:${lib},INTERFACE_INCLUDE_DIRECTORIES>)
    target_compile_definitions(${target} PRIVATE $<TARGET_PROPERTY:${lib},INTERFACE_COMPILE_DEFINITIONS>)
    list(APPEND first_party $<TARGET_FILE:${lib}>)
    add_dependencies(${target} ${lib})
  endforeach()
  # One group: the archives refer to each other in every direction (absl's especially).
  target_link_libraries(${target} PRIVATE
    -Wl,--start-group ${first_party} ${absl_archives} ${archives} -Wl,--end-group
    ${FLOTILLA_ZSTD_LIB} ${ARG_KEEP_TARGETS} Threads::Threads ${CMAKE_DL_LIBS})
endfunction()
