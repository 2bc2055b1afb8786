# Install rules of wort (included from the top-level CMakeLists.txt when WORT_INSTALL is on):
#   <prefix>/include/wort/*.h                the public headers (and the generated version.h);
#   <prefix>/include/*.h                     a top-level C API header, if include/ has one
#   <prefix>/lib/libwort.so.X.Y.Z, .so.X.Y, .so, libwort.a
#   <prefix>/bin/wort                        the CLI
#   <prefix>/share/wort/scripts, data/published  the CLI's report scripts and the published values
#   <prefix>/lib/cmake/wort/                 wortConfig.cmake, wortConfigVersion.cmake, wortTargets*.cmake
#   <prefix>/lib/pkgconfig/wort.pc
include(CMakePackageConfigHelpers)

install(TARGETS wort_shared wort_static EXPORT wortTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT wort_runtime NAMELINK_COMPONENT wort_development
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT wort_development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET wort)  # WORT_TOOLS
  install(TARGETS wort RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT wort_runtime)
  # What `wort reproduce` and `wort knn` run after their measurements (the report and plots) and
  # read (the published values): the installed CLI finds them in <prefix>/share/wort, relative to
  # its own executable (src/cli/files.cc FindFile), with no source tree.
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/report.py ${PROJECT_SOURCE_DIR}/scripts/knn_report.py
                   ${PROJECT_SOURCE_DIR}/scripts/knn_faiss.py
          DESTINATION ${CMAKE_INSTALL_DATADIR}/wort/scripts COMPONENT wort_runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/published DESTINATION ${CMAKE_INSTALL_DATADIR}/wort/data
          COMPONENT wort_runtime FILES_MATCHING PATTERN "*.json")
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/wort DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT wort_development FILES_MATCHING PATTERN "*.h")
# A top-level C header (include/wort.h or the like, for the C API), if there is one.
file(GLOB WORT_TOP_HEADERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/*.h)
if(WORT_TOP_HEADERS)
  install(FILES ${WORT_TOP_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT wort_development)
endif()
if(EXISTS ${WORT_GENERATED_INCLUDE}/wort/version.h)
  install(FILES ${WORT_GENERATED_INCLUDE}/wort/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/wort
          COMPONENT wort_development)
endif()

set(WORT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/wort)
install(EXPORT wortTargets NAMESPACE wort:: DESTINATION ${WORT_CMAKE_DIR} COMPONENT wort_development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/wortConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/wortConfig.cmake INSTALL_DESTINATION ${WORT_CMAKE_DIR}
                              PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# 0.x: a minor version may change the API, so only the same major.minor satisfies a request.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/wortConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/wortConfig.cmake ${PROJECT_BINARY_DIR}/wortConfigVersion.cmake
        DESTINATION ${WORT_CMAKE_DIR} COMPONENT wort_development)

# wort.pc: the prefix is computed from the .pc file's own place, so the file stays right for
# `cmake --install --prefix DIR` and DESTDIR installs.
file(RELATIVE_PATH WORT_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" WORT_PC_TO_PREFIX "${WORT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/wort.pc.in ${PROJECT_BINARY_DIR}/wort.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/wort-c.pc.in ${PROJECT_BINARY_DIR}/wort-c.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/wort.pc ${PROJECT_BINARY_DIR}/wort-c.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT wort_development)
