# Finds the kxform command of the installation this package directory belongs to:
# KXFORM_EXECUTABLE if set, else the `kxform` beside the Python environment that holds
# this file (<env>/lib/pythonX.Y/site-packages/kxform/cmake), else the one on PATH.
if(NOT KXFORM_EXECUTABLE)
  get_filename_component(_kxform_env "${CMAKE_CURRENT_LIST_DIR}/../../../../.." ABSOLUTE)
  find_program(KXFORM_EXECUTABLE NAMES kxform
               HINTS "${_kxform_env}/bin" "${_kxform_env}/Scripts" ENV VIRTUAL_ENV PATH_SUFFIXES bin
               DOC "the kxform command")
endif()
if(NOT KXFORM_EXECUTABLE)
  message(FATAL_ERROR "kxform: the kxform command was not found; put it on PATH or set KXFORM_EXECUTABLE")
endif()
execute_process(COMMAND "${KXFORM_EXECUTABLE}" --version OUTPUT_VARIABLE _kxform_version
                RESULT_VARIABLE _kxform_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _kxform_rc EQUAL 0 OR NOT _kxform_version MATCHES "^kxform ([0-9][0-9.]*)")
  message(FATAL_ERROR "kxform: '${KXFORM_EXECUTABLE} --version' failed (${_kxform_rc}): ${_kxform_version}")
endif()
set(KXFORM_VERSION "${CMAKE_MATCH_1}")
