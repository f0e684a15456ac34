# find_package(kxform 0.1 CONFIG): the version is the installed command's (`kxform --version`);
# any newer version is compatible.
include("${CMAKE_CURRENT_LIST_DIR}/kxformExecutable.cmake")
set(PACKAGE_VERSION "${KXFORM_VERSION}")
if(PACKAGE_FIND_VERSION AND PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
