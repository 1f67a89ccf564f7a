# Compiler warnings shared by every first-party target.
function(flotilla_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
  if(FLOTILLA_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
  if(FLOTILLA_THREAD_SAFETY)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety -Werror=thread-safety>)
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
# The binary's main is tests/testing/gtest_main.cc: when every test it ran was skipped it exits
# FLOTILLA_TEST_SKIP_CODE and CTest reports it "Skipped", never "Passed".
set(FLOTILLA_TEST_SKIP_CODE 77)
function(flotilla_test name)
  cmake_parse_arguments(ARG "RUN_SERIAL" "TIMEOUT" "LABELS;SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} flotilla_gtest_main GTest::gtest GTest::gmock)
  flotilla_warnings(${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                       SKIP_RETURN_CODE ${FLOTILLA_TEST_SKIP_CODE}
                       ENVIRONMENT "FLOTILLA_SOURCE_DIR=${PROJECT_SOURCE_DIR};FLOTILLA_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(ARG_RUN_SERIAL)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()

# flotilla_link_archives(TARGET LIBS first-party-libraries... [KEEP_TARGETS targets...])
# Links TARGET with the first-party static libraries' archives and every third-party C or C++
# dependency they have from its static archive (absl, libbpf, libelf, zlib, libseccomp,
# yaml-cpp, libcrypto), and the C++ runtime too (libstdc++, libgcc; spdlog and fmt, which the
# system ships only as shared objects, compiled in from their headers: spdlog_fmt_static.cc),
# leaving only glibc's shared objects. A process that starts often (the small `flotilla`
# binary) then maps libc and libm and nothing else: the dynamic loader's work was the largest
# part of starting it. glibc itself stays shared on purpose: a fully static glibc would load
# the NSS modules of the host's glibc at run time for getaddrinfo (the policies' deny-list
# lookups), which only works when the two glibc versions match. KEEP_TARGETS are linked as
# they are (header-only: CLI11; spdlog::spdlog only for its headers when its sources are
# compiled in). Where the system lacks one of the archives the target links the usual way.
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
  # The C++ runtime from its archives, where the compiler has them (GCC and Clang with
  # libstdc++); spdlog and fmt then come in as sources, since a static libstdc++ must not
  # meet a shared library built against the shared one.
  set(keep ${ARG_KEEP_TARGETS})
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.a
                  OUTPUT_VARIABLE libstdcxx_archive OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_target_property(spdlog_defs spdlog::spdlog INTERFACE_COMPILE_DEFINITIONS)
  if(IS_ABSOLUTE "${libstdcxx_archive}" AND EXISTS "${libstdcxx_archive}" AND
     "SPDLOG_FMT_EXTERNAL" IN_LIST spdlog_defs AND "SPDLOG_COMPILED_LIB" IN_LIST spdlog_defs)
    list(REMOVE_ITEM keep spdlog::spdlog)
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/spdlog_fmt_static.cc)
    target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:spdlog::spdlog,INTERFACE_INCLUDE_DIRECTORIES>)
    target_compile_definitions(${target} PRIVATE SPDLOG_COMPILED_LIB SPDLOG_FMT_EXTERNAL)
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  else()
    message(STATUS "${target}: no static libstdc++ or an spdlog with its own fmt; the C++ runtime stays shared")
  endif()
  # One group: the archives refer to each other in every direction (absl's especially).
  target_link_libraries(${target} PRIVATE
    -Wl,--start-group ${first_party} ${absl_archives} ${archives} -Wl,--end-group
    ${FLOTILLA_ZSTD_LIB} ${keep} Threads::Threads ${CMAKE_DL_LIBS})
endfunction()

# flotilla_assert_not_linked(TARGET FORBIDDEN...)
# Fails the configure step when TARGET links any of FORBIDDEN, directly or through the link
# interface of what it links (the whole closure, as the linker would see it).
function(flotilla_assert_not_linked target)
  set(seen)
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue current)
    if(current IN_LIST seen OR NOT TARGET ${current})
      continue()
    endif()
    list(APPEND seen ${current})
    get_target_property(type ${current} TYPE)
    set(deps)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(direct ${current} LINK_LIBRARIES)
      if(direct)
        list(APPEND deps ${direct})
      endif()
    endif()
    get_target_property(iface ${current} INTERFACE_LINK_LIBRARIES)
    if(iface)
      list(APPEND deps ${iface})
    endif()
    foreach(dep ${deps})
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
      if(dep IN_LIST ARGN)
        message(FATAL_ERROR "${target} links ${dep} (through ${current}); it must reach sandboxes only "
                            "through the NodeAgent API")
      endif()
      list(APPEND queue ${dep})
    endforeach()
  endwhile()
endfunction()
