# `cmake --install` puts the headers, the static libraries and a package config in place, so that
# a user's project can say find_package(gpubatch) and link gpubatch::gpubatch.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gpubatch DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS gpubatch gpubatch_core gpubatch_plan gpubatch_gpu gpubatch_executor
        EXPORT gpubatchTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT gpubatchTargets NAMESPACE gpubatch:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpubatch)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpubatchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpubatchConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpubatch)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpubatchConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpubatchConfig.cmake ${PROJECT_BINARY_DIR}/gpubatchConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpubatch)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/config/ DESTINATION ${CMAKE_INSTALL_DATADIR}/gpubatch/config)
