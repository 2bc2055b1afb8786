# Consumer tests (label "consumer"): wort used from outside, the way its users use it, so that
# a broken library, install rule, CMake package or wort.pc fails the suite.
#   consumer_static_kinds   a program linked against libwort.a alone opens every index kind
#   consumer_install        cmake --install into a temporary prefix; tests/consumer/find_package
#                           built with find_package(wort) (shared and static), the same program
#                           built with pkg-config, the installed CLI run; and, when
#                           the C API exists, its C99 test (tests/capi/capi_test.c) via pkg-config
#   consumer_subdirectory   tests/consumer/subdirectory: add_subdirectory(wort)
# The sub-builds use this build's compiler and compiler launcher (ccache), so that they compile
# little that this build has not compiled already.
add_executable(wort_static_kinds ${PROJECT_SOURCE_DIR}/tests/consumer/static_kinds.cc)
target_link_libraries(wort_static_kinds PRIVATE wort_static)
wort_set_options(wort_static_kinds)
add_test(NAME consumer_static_kinds COMMAND wort_static_kinds)

find_program(WORT_PKG_CONFIG NAMES pkg-config pkgconf)
set(WORT_CONSUMER_ARGS
    -DWORT_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DWORT_BUILD_DIR=${PROJECT_BINARY_DIR}
    -DWORT_VERSION=${PROJECT_VERSION} -DWORT_SOVERSION=${WORT_SOVERSION} -DWORT_GENERATOR=${CMAKE_GENERATOR} -DWORT_BUILD_TYPE=${CMAKE_BUILD_TYPE}
    -DWORT_CXX=${CMAKE_CXX_COMPILER} -DWORT_CC=${CMAKE_C_COMPILER}
    -DWORT_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER} -DWORT_PKG_CONFIG=${WORT_PKG_CONFIG}
    "-DWORT_ARCH_FLAGS=${WORT_ARCH_FLAGS}" -DWORT_SANITIZE=${WORT_SANITIZE})
add_test(NAME consumer_install
         COMMAND ${CMAKE_COMMAND} ${WORT_CONSUMER_ARGS} -DWORT_MODE=install
                 -DWORT_WORK_DIR=${PROJECT_BINARY_DIR}/consumer/install -P ${PROJECT_SOURCE_DIR}/cmake/run_consumer.cmake)
add_test(NAME consumer_subdirectory
         COMMAND ${CMAKE_COMMAND} ${WORT_CONSUMER_ARGS} -DWORT_MODE=subdirectory
                 -DWORT_WORK_DIR=${PROJECT_BINARY_DIR}/consumer/subdirectory -P ${PROJECT_SOURCE_DIR}/cmake/run_consumer.cmake)
set_tests_properties(consumer_static_kinds consumer_install consumer_subdirectory PROPERTIES LABELS consumer TIMEOUT 900)
