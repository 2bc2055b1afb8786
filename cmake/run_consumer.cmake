# Driver of the consumer tests (cmake/consumer_tests.cmake): cmake -DWORT_MODE=install|subdirectory
# -DWORT_WORK_DIR=... -DWORT_SOURCE_DIR=... -DWORT_BUILD_DIR=... -P run_consumer.cmake
# Fails (FATAL_ERROR, a non-zero exit) at the first step that fails, naming it.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(RUN_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORT_WORK_DIR})
file(MAKE_DIRECTORY ${WORT_WORK_DIR})
set(pool /dev/shm/wort-consumer-${WORT_MODE}.pool)
set(common_args -G ${WORT_GENERATOR} -DCMAKE_BUILD_TYPE=${WORT_BUILD_TYPE} -DCMAKE_CXX_COMPILER=${WORT_CXX}
    -DCMAKE_C_COMPILER=${WORT_CC})
# A sanitizer build's libwort needs its programs built with the same sanitizers.
set(san_flags "")
if(WORT_SANITIZE)
  set(san_flags -fsanitize=address,undefined -fno-omit-frame-pointer)
  list(APPEND common_args "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer"
       "-DCMAKE_C_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer")
endif()
if(WORT_LAUNCHER)
  list(APPEND common_args -DCMAKE_CXX_COMPILER_LAUNCHER=${WORT_LAUNCHER} -DCMAKE_C_COMPILER_LAUNCHER=${WORT_LAUNCHER})
endif()

if(WORT_MODE STREQUAL "install")
  set(prefix ${WORT_WORK_DIR}/prefix)
  run("cmake --install" ${CMAKE_COMMAND} --install ${WORT_BUILD_DIR} --prefix ${prefix})
  # The layout a user relies on.
  file(GLOB libdirs LIST_DIRECTORIES true ${prefix}/lib ${prefix}/lib64 ${prefix}/lib/*-linux-gnu)
  set(libdir "")
  foreach(d ${libdirs})
    if(EXISTS ${d}/pkgconfig/wort.pc)
      set(libdir ${d})
    endif()
  endforeach()
  if(NOT libdir)
    message(FATAL_ERROR "consumer test: no lib*/pkgconfig/wort.pc under ${prefix}")
  endif()
  foreach(f include/wort/index.h include/wort/pool.h include/wort/status.h bin/wort)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "consumer test: ${f} was not installed")
    endif()
  endforeach()
  foreach(f libwort.so libwort.a cmake/wort/wortConfig.cmake cmake/wort/wortConfigVersion.cmake cmake/wort/wortTargets.cmake)
    if(NOT EXISTS ${libdir}/${f})
      message(FATAL_ERROR "consumer test: ${libdir}/${f} was not installed")
    endif()
  endforeach()
  # No internal header is installed (the public include tree is include/wort/ only).
  file(GLOB_RECURSE installed_headers RELATIVE ${prefix}/include ${prefix}/include/*)
  foreach(h ${installed_headers})
    if(NOT h MATCHES "^(wort/)?[A-Za-z0-9_]+\\.h$")
      message(FATAL_ERROR "consumer test: unexpected file installed under include/: ${h}")
    endif()
  endforeach()
  run("installed wort --help" ${prefix}/bin/wort --help)

  # The installed `wort reproduce` writes its report and plots from <prefix>/share/wort (the
  # report script and the published values), not from the source tree: a tiny run finds them
  # there, and with the installed script moved away it says it has none (the source tree, which
  # this test runs beside, is never consulted by an installed binary).
  foreach(f share/wort/scripts/report.py share/wort/data/published/wort_fast17.json)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "consumer test: ${f} was not installed")
    endif()
  endforeach()
  set(rep ${WORT_WORK_DIR}/reproduce)
  set(no_env ${CMAKE_COMMAND} -E env --unset=WORT_REPORT_SCRIPT --unset=WORT_PUBLISHED --unset=WORT_PEERS_SRC)
  execute_process(COMMAND ${no_env} ${prefix}/bin/wort reproduce --scale tiny --only fig7 --index woart --no-cachegrind
                  --out ${rep} RESULT_VARIABLE rc1 OUTPUT_VARIABLE o1 ERROR_VARIABLE e1)
  string(FIND "${o1}${e1}" "share/wort/scripts/report.py" at)
  if(NOT rc1 EQUAL 0 OR at EQUAL -1 OR NOT EXISTS ${rep}/report.md)
    message(FATAL_ERROR "consumer test: the installed wort reproduce did not run <prefix>/share/wort/scripts/report.py "
                        "or wrote no report.md:\n${o1}\n${e1}")
  endif()
  string(FIND "${o1}${e1}" "share/wort/data/published/wort_fast17.json" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "consumer test: the installed wort reproduce did not use the installed published values:\n${o1}\n${e1}")
  endif()
  execute_process(COMMAND python3 -c "import matplotlib" RESULT_VARIABLE no_mpl OUTPUT_QUIET ERROR_QUIET)
  if(no_mpl EQUAL 0 AND NOT EXISTS ${rep}/fig7.png)
    message(FATAL_ERROR "consumer test: the installed wort reproduce drew no fig7.png:\n${o1}\n${e1}")
  endif()
  file(RENAME ${prefix}/share/wort/scripts/report.py ${WORT_WORK_DIR}/report.py.moved)
  file(REMOVE_RECURSE ${rep})
  execute_process(COMMAND ${no_env} ${prefix}/bin/wort reproduce --scale tiny --only fig7 --index woart --no-cachegrind
                  --out ${rep} OUTPUT_VARIABLE o2 ERROR_VARIABLE e2)
  file(RENAME ${WORT_WORK_DIR}/report.py.moved ${prefix}/share/wort/scripts/report.py)
  string(FIND "${o2}${e2}" "scripts/report.py not found" at)
  if(at EQUAL -1 OR EXISTS ${rep}/report.md)
    message(FATAL_ERROR "consumer test: without its installed report script, the installed wort reproduce found one "
                        "elsewhere (the source tree?):\n${o2}\n${e2}")
  endif()
  message(STATUS "installed wort reproduce: report and plots from share/wort, no source tree: ok")

  # The shared library's SONAME is the one CMakeLists.txt derives from the version.
  find_program(readelf NAMES readelf)
  if(readelf)
    execute_process(COMMAND ${readelf} -d ${libdir}/libwort.so OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0 OR NOT dyn MATCHES "Library soname: \\[libwort\\.so\\.${WORT_SOVERSION}\\]")
      message(FATAL_ERROR "consumer test: the installed libwort.so's SONAME is not libwort.so.${WORT_SOVERSION}:\n${dyn}")
    endif()
  endif()

  # 1. find_package(wort MAJOR.MINOR CONFIG), shared and static (the version this build
  # installs, from CMakeLists.txt's project(): the test states no version of its own).
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" version_request "${WORT_VERSION}")
  run("configure find_package consumer" ${CMAKE_COMMAND} -S ${WORT_SOURCE_DIR}/tests/consumer/find_package
      -B ${WORT_WORK_DIR}/find_package ${common_args} -DCMAKE_PREFIX_PATH=${prefix}
      -DWORT_VERSION_REQUEST=${version_request})
  run("build find_package consumer" ${CMAKE_COMMAND} --build ${WORT_WORK_DIR}/find_package)
  run("run find_package consumer (libwort.so)" ${WORT_WORK_DIR}/find_package/consumer_shared ${pool})
  run("run find_package consumer (libwort.a)" ${WORT_WORK_DIR}/find_package/consumer_static ${pool})
  # A version this package does not satisfy is refused: a later major, and (0.x: the minor
  # version is the ABI's) the previous minor version.
  set(refused 99)
  if(WORT_VERSION MATCHES "^0\\.([0-9]+)\\." AND CMAKE_MATCH_1 GREATER 0)
    math(EXPR prev_minor "${CMAKE_MATCH_1} - 1")
    list(APPEND refused 0.${prev_minor})
  endif()
  foreach(v ${refused})
    file(WRITE ${WORT_WORK_DIR}/badversion/CMakeLists.txt
         "cmake_minimum_required(VERSION 3.20)\nproject(v LANGUAGES CXX)\nfind_package(wort ${v} CONFIG REQUIRED)\n")
    file(REMOVE_RECURSE ${WORT_WORK_DIR}/badversion/build)
    execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORT_WORK_DIR}/badversion -B ${WORT_WORK_DIR}/badversion/build
                    -DCMAKE_PREFIX_PATH=${prefix} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      message(FATAL_ERROR "consumer test: find_package(wort ${v}) was satisfied by the installed version ${WORT_VERSION}")
    endif()
  endforeach()

  # 2. pkg-config: the same C++ program, and the C API program when there is one.
  if(NOT WORT_PKG_CONFIG)
    message(FATAL_ERROR "consumer test: pkg-config not found (apt-get install pkgconf)")
  endif()
  set(ENV{PKG_CONFIG_PATH} ${libdir}/pkgconfig)
  run("pkg-config --modversion wort" ${WORT_PKG_CONFIG} --modversion wort)
  execute_process(COMMAND ${WORT_PKG_CONFIG} --cflags --libs wort OUTPUT_VARIABLE pc_flags
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: pkg-config --cflags --libs wort failed")
  endif()
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  list(FIND pc_flags "-std=c++20" std_index)  # (script mode: no IN_LIST, policy CMP0057 is unset)
  if(std_index EQUAL -1)
    message(FATAL_ERROR "consumer test: wort.pc's Cflags lack -std=c++20 (the C++ headers need it): ${pc_flags}")
  endif()
  execute_process(COMMAND ${WORT_PKG_CONFIG} --cflags --libs wort-c OUTPUT_VARIABLE pc_c_flags
                  OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: pkg-config --cflags --libs wort-c failed")
  endif()
  separate_arguments(pc_c_flags UNIX_COMMAND "${pc_c_flags}")
  separate_arguments(arch UNIX_COMMAND "${WORT_ARCH_FLAGS}")
  # The C++ program with wort.pc's flags alone (its -std=c++20, no flag of ours).
  run("build pkg-config C++ consumer" ${WORT_CXX} ${arch} ${san_flags} ${WORT_SOURCE_DIR}/tests/consumer/consumer.cc
      ${pc_flags} -Wl,-rpath,${libdir} -o ${WORT_WORK_DIR}/consumer_pkgconfig)
  run("run pkg-config C++ consumer" ${WORT_WORK_DIR}/consumer_pkgconfig ${pool})
  # The C API's programs, C99, through pkg-config against the installed libwort.so: the C API's
  # own test (tests/capi/capi_test.c, when the C API is there) and tests/consumer/c/main.c if any.
  # Each gets a directory for its pool files.
  set(c_found OFF)
  foreach(csrc tests/capi/capi_test.c tests/consumer/c/main.c)
    if(EXISTS ${WORT_SOURCE_DIR}/${csrc})
      set(c_found ON)
      get_filename_component(cname ${csrc} NAME_WE)
      run("build pkg-config C consumer ${csrc}" ${WORT_CC} -std=c99 -pedantic -Wall -Werror -D_POSIX_C_SOURCE=200809L
          -DWORT_EXPECTED_VERSION=\"${WORT_VERSION}\"
          ${san_flags} ${WORT_SOURCE_DIR}/${csrc} ${pc_c_flags} -Wl,-rpath,${libdir} -o ${WORT_WORK_DIR}/c_${cname})
      file(MAKE_DIRECTORY /dev/shm/wort-consumer-c)
      run("run pkg-config C consumer ${csrc}" ${WORT_WORK_DIR}/c_${cname} /dev/shm/wort-consumer-c)
      file(REMOVE_RECURSE /dev/shm/wort-consumer-c)
    endif()
  endforeach()
  if(NOT c_found)
    message(STATUS "no C API program (tests/capi/capi_test.c, tests/consumer/c/main.c): no C consumer built")
  endif()
elseif(WORT_MODE STREQUAL "subdirectory")
  run("configure add_subdirectory consumer" ${CMAKE_COMMAND} -S ${WORT_SOURCE_DIR}/tests/consumer/subdirectory
      -B ${WORT_WORK_DIR}/build ${common_args} -DWORT_SOURCE_DIR=${WORT_SOURCE_DIR} "-DWORT_ARCH_FLAGS=${WORT_ARCH_FLAGS}"
      -DWORT_SANITIZE=${WORT_SANITIZE})
  run("build add_subdirectory consumer" ${CMAKE_COMMAND} --build ${WORT_WORK_DIR}/build -j2)
  run("run add_subdirectory consumer (static)" ${WORT_WORK_DIR}/build/consumer_static ${pool})
  run("run add_subdirectory consumer (shared)" ${WORT_WORK_DIR}/build/consumer_shared ${pool})
else()
  message(FATAL_ERROR "run_consumer.cmake: WORT_MODE must be install or subdirectory")
endif()
file(REMOVE ${pool})
