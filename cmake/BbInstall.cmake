# `cmake --install BUILD --prefix DIR`: the pure core as a CMake package (README "From C++"):
# DIR/include/bubblebench/{common,schedule,sim,model,advise}/ (headers), DIR/lib/libbb_core.a
# and DIR/lib/cmake/bubblebench/ (bubblebenchConfig.cmake, the target bubblebench::core). No
# MPI, CUDA, HDF5 or BLAS: the core uses the standard library and threads only.
# `find_package(bubblebench CONFIG)` + `target_link_libraries(app bubblebench::core)`; the
# consumer examples/cpp/ is built against an installed tree by ctest install.consumer.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(BB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/bubblebench)
install(TARGETS bb_core EXPORT bubblebenchTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT core)
foreach(room common schedule sim model advise)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/src/${room}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/bubblebench COMPONENT core
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.inc")
endforeach()
install(EXPORT bubblebenchTargets NAMESPACE bubblebench:: DESTINATION ${BB_CMAKE_DIR}
        COMPONENT core)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/bubblebenchConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/bubblebenchConfig.cmake
                              INSTALL_DESTINATION ${BB_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/bubblebenchConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/bubblebenchConfig.cmake
              ${CMAKE_BINARY_DIR}/bubblebenchConfigVersion.cmake
        DESTINATION ${BB_CMAKE_DIR} COMPONENT core)

if(TARGET bubblebench)
  # Installs this build's core into a scratch prefix, then configures, builds and runs
  # examples/cpp/ against it (with this build's sanitizer flags, which the archive needs).
  set(BB_CONSUMER_FLAGS "")
  if(BB_SANITIZE)
    set(BB_CONSUMER_FLAGS "-fsanitize=address,undefined")
  endif()
  add_test(NAME install.consumer
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cmake/install_consumer.sh ${CMAKE_BINARY_DIR}
                   ${CMAKE_SOURCE_DIR}/examples/cpp "${BB_CONSUMER_FLAGS}")
  set_tests_properties(install.consumer PROPERTIES TIMEOUT 300)
endif()
