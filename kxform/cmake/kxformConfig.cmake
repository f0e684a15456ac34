# kxform's CMake package configuration.
#
#   cmake -S . -B build -Dkxform_DIR="$(kxform --cmake-dir)"
#
#   find_package(kxform CONFIG REQUIRED)
#   add_executable(app main.cu gemm.cu)
#   kxform_transform(app PASSES swizzle)
#
# kxform_transform(<target> [PASSES pass...] [HW name] [VERIFY mode] [CONFIG file]
#                  [SOURCES src...] [OUTPUT_DIR dir] [LOCK] [LOCK_FILE file] [OPTIONS arg...])
#
# Runs `kxform apply -o` on the target's CUDA sources (`.cu`; SOURCES narrows the set)
# into the build tree (default <binary dir>/kxform/<target>) and makes the target
# compile the copies; the source tree is never written (the pass logs go to
# <output dir>/logs). One custom command per source with a depfile written by kxform
# (`apply --depfile`): a source is re-processed only when it, a header it includes
# with quotes, or a decision input (the configuration, a hardware profile file, its
# harness spec, the lock) changed. A depfile names only files that exist, so a step
# run on every build (the custom target <target>_kxform_inputs, `kxform deps -o`)
# keeps one stamp per source (<copy>.inputs: the decision inputs and their hashes),
# rewritten only when it changed; each copy depends on its stamp, so a kxform.toml or a
# spec added after the first build re-runs kxform, and a no-op build runs nothing but
# that step. The target's include directories
# and compile definitions are passed on (-I/-D), so kxform's compile check and
# verification see what the build sees. Options not given here come from the
# project configuration ([tool.kxform] in pyproject.toml or kxform.toml), as on the
# command line. LOCK passes --lock FILE (docs/lockfile.md; FILE: LOCK_FILE, default
# ${CMAKE_SOURCE_DIR}/kxform.lock): kernels in the lock are replayed without asking
# any proposer, the others are decided and recorded in it (the one file written into
# the source tree: commit it), and a source is re-processed when the lock changes.
# Checked at configure time: the kxform found must support --lock.
# A kernel that fails a check is not rewritten and fails the build (exit 1), as a
# compiler error would; add VERIFY static or exclude the kernel in the configuration
# to build anyway.
#
# Call it after every source has been added to the target. Sources outside the
# target's source directory are compiled as they are (a warning says so).

if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "kxform_transform needs CMake 3.20 or newer (DEPFILE for every generator)")
endif()

include("${CMAKE_CURRENT_LIST_DIR}/kxformExecutable.cmake")
set(kxform_FOUND TRUE)

cmake_policy(PUSH)
cmake_policy(VERSION 3.20...3.31)  # recorded by the function below: CMP0116 (depfile paths) NEW

function(kxform_transform target)
  cmake_parse_arguments(PARSE_ARGV 1 KX "LOCK" "HW;VERIFY;CONFIG;OUTPUT_DIR;LOCK_FILE" "PASSES;SOURCES;OPTIONS")
  if(KX_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kxform_transform(${target}): unknown arguments: ${KX_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET "${target}")
    message(FATAL_ERROR "kxform_transform: '${target}' is not a target")
  endif()
  get_target_property(src_dir "${target}" SOURCE_DIR)
  get_target_property(bin_dir "${target}" BINARY_DIR)
  get_target_property(sources "${target}" SOURCES)
  set(out_dir "${bin_dir}/kxform/${target}")
  if(KX_OUTPUT_DIR)
    get_filename_component(out_dir "${KX_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${bin_dir}")
  endif()

  set(cmd "${KXFORM_EXECUTABLE}" apply -q -o "${out_dir}")
  if(KX_PASSES)
    list(JOIN KX_PASSES "," passes)
    list(APPEND cmd --pass "${passes}")
  endif()
  set(deps_cmd "${KXFORM_EXECUTABLE}" deps -q -o "${out_dir}")
  foreach(option HW VERIFY CONFIG)
    if(KX_${option})
      string(TOLOWER "${option}" flag)
      list(APPEND cmd "--${flag}" "${KX_${option}}")
      if(NOT option STREQUAL "VERIFY")
        list(APPEND deps_cmd "--${flag}" "${KX_${option}}")
      endif()
    endif()
  endforeach()
  set(extra_deps "")
  if(KX_LOCK_FILE AND NOT KX_LOCK)
    message(FATAL_ERROR "kxform_transform(${target}): LOCK_FILE goes with LOCK")
  endif()
  if(KX_LOCK)
    _kxform_require_lock()
    set(lock_file "${CMAKE_SOURCE_DIR}/kxform.lock")
    if(KX_LOCK_FILE)
      get_filename_component(lock_file "${KX_LOCK_FILE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    endif()
    list(APPEND cmd "--lock=${lock_file}")
    if(EXISTS "${lock_file}")  # (once written, kxform's depfile names it too)
      list(APPEND extra_deps "${lock_file}")
    endif()
  endif()
  set(includes "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  set(defines "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
  list(APPEND cmd "$<$<BOOL:${includes}>:-I$<JOIN:${includes},$<SEMICOLON>-I>>"
                  "$<$<BOOL:${defines}>:-D$<JOIN:${defines},$<SEMICOLON>-D>>" ${KX_OPTIONS})

  set(selected "")
  foreach(src IN LISTS KX_SOURCES)
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${src_dir}")
    list(APPEND selected "${abs}")
  endforeach()

  set(new_sources "")
  set(original_dirs "")
  set(stamped "")
  set(stamps "")
  foreach(src IN LISTS sources)
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${src_dir}")
    set(take FALSE)
    if(src MATCHES "^\\$<")  # generator expressions are left alone
    elseif(KX_SOURCES)
      if(abs IN_LIST selected)
        set(take TRUE)
      endif()
    elseif(abs MATCHES "\\.cu$")
      set(take TRUE)
    endif()
    file(RELATIVE_PATH rel "${src_dir}" "${abs}")
    if(take AND rel MATCHES "^\\.\\./")
      message(WARNING "kxform_transform(${target}): ${src} is outside ${src_dir}; compiled as it is")
      set(take FALSE)
    endif()
    if(NOT take)
      list(APPEND new_sources "${src}")
      continue()
    endif()
    set(copy "${out_dir}/${rel}")
    add_custom_command(
      OUTPUT "${copy}"
      COMMAND ${cmd} --log "${out_dir}/logs/${rel}.jsonl" --depfile "${copy}.d" "${rel}"
      DEPENDS "${abs}" "${copy}.inputs" ${extra_deps}
      DEPFILE "${copy}.d"
      WORKING_DIRECTORY "${src_dir}"
      COMMENT "kxform ${rel}"
      COMMAND_EXPAND_LISTS
      VERBATIM)
    list(APPEND new_sources "${copy}")
    list(APPEND stamped "${rel}")
    list(APPEND stamps "${copy}.inputs")
    get_filename_component(dir "${abs}" DIRECTORY)
    list(APPEND original_dirs "${dir}")
  endforeach()
  if(stamps)
    # Run on every build; BYPRODUCTS lets Ninja restat the stamps (an unchanged one
    # re-runs nothing), and the target waits for it under every generator.
    add_custom_target("${target}_kxform_inputs"
      COMMAND ${deps_cmd} ${stamped}
      BYPRODUCTS ${stamps}
      WORKING_DIRECTORY "${src_dir}"
      COMMENT "kxform: decision inputs of ${target}"
      VERBATIM)
    add_dependencies("${target}" "${target}_kxform_inputs")
  endif()
  set_property(TARGET "${target}" PROPERTY SOURCES ${new_sources})
  if(original_dirs)
    list(REMOVE_DUPLICATES original_dirs)
    # A quoted include that kxform did not copy (not a CUDA/C header) resolves to the original.
    target_include_directories("${target}" PRIVATE ${original_dirs})
  endif()
endfunction()

function(_kxform_require_lock)
  execute_process(COMMAND "${KXFORM_EXECUTABLE}" apply --help OUTPUT_VARIABLE help ERROR_QUIET)
  if(NOT help MATCHES "--lock")
    message(FATAL_ERROR "kxform_transform(... LOCK): this kxform (${KXFORM_EXECUTABLE}) has no lockfile "
                        "support (kxform apply --lock)")
  endif()
endfunction()

cmake_policy(POP)
