# Packaging test driver, run via `cmake -P` from ctest.
#
# Required -D variables:
#   MODE                 find_package | add_subdirectory | fetch_content
#   CONSUMER_SOURCE_DIR  the consumer project (tests/package/<MODE>)
#   WORK_DIR             scratch directory (wiped on every run)
#   EMBER_SOURCE_DIR     ember's source tree
#   EMBER_BINARY_DIR     ember's (configured) build tree, used for `cmake --install`
#   CXX_COMPILER         compiler of the parent build
# Optional: GENERATOR, MAKE_PROGRAM, EIGEN3_DIR, CONFIG
#   README               a Markdown page whose consumer project is built instead of
#                        CONSUMER_SOURCE_DIR: the code blocks right after the comments
#                        `<!-- package.readme: CMakeLists.txt -->` and `<!-- package.readme: main.cpp -->`
#                        are the project's files, and the program's output must equal the block
#                        after `<!-- package.readme: output -->`
#   PROGRAM              the program to run, relative to the consumer's build tree (bin/consumer)
cmake_minimum_required(VERSION 3.21)

if(DEFINED README)
  set(CONSUMER_SOURCE_DIR "${WORK_DIR}/src")
endif()
if(NOT PROGRAM)
  set(PROGRAM bin/consumer)
endif()

foreach(var MODE CONSUMER_SOURCE_DIR WORK_DIR EMBER_SOURCE_DIR EMBER_BINARY_DIR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_package_test.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(run_step name)
  message(STATUS "[package.${MODE}] ${name}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[package.${MODE}] step '${name}' failed (result: ${rc})")
  endif()
endfunction()

set(consumer_build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# The body of the fenced code block on the line after `<!-- package.readme: <name> -->` in README.
function(readme_block text name out)
  set(marker "<!-- package.readme: ${name} -->\n```")
  string(FIND "${text}" "${marker}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${README}: no code block right after <!-- package.readme: ${name} -->")
  endif()
  string(LENGTH "${marker}" skip)
  math(EXPR at "${at} + ${skip}")
  string(SUBSTRING "${text}" ${at} -1 rest)
  string(FIND "${rest}" "\n" eol)  # the end of the opening fence's line
  math(EXPR eol "${eol} + 1")
  string(SUBSTRING "${rest}" ${eol} -1 rest)
  string(FIND "${rest}" "\n```" close)
  if(close EQUAL -1)
    message(FATAL_ERROR "${README}: the block after <!-- package.readme: ${name} --> never ends")
  endif()
  math(EXPR close "${close} + 1")
  string(SUBSTRING "${rest}" 0 ${close} body)
  set(${out} "${body}" PARENT_SCOPE)
endfunction()

if(DEFINED README)
  file(READ "${README}" readme_text)
  foreach(file CMakeLists.txt main.cpp)
    readme_block("${readme_text}" ${file} body)
    file(WRITE "${CONSUMER_SOURCE_DIR}/${file}" "${body}")
  endforeach()
  readme_block("${readme_text}" output expected_output)
endif()

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}"
  -B "${consumer_build}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}")
if(GENERATOR)
  list(APPEND configure_args -G "${GENERATOR}")
endif()
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(EIGEN3_DIR)
  list(APPEND configure_args "-DEigen3_DIR=${EIGEN3_DIR}")
endif()

if(MODE STREQUAL "find_package")
  set(prefix "${WORK_DIR}/prefix")
  run_step(install "${CMAKE_COMMAND}" --install "${EMBER_BINARY_DIR}" --prefix "${prefix}" --config "${CONFIG}")
  if(NOT EXISTS "${prefix}/share/cmake/ember/emberConfig.cmake")
    message(FATAL_ERROR "[package.${MODE}] emberConfig.cmake not installed under ${prefix}/share/cmake/ember")
  endif()
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${prefix}")
elseif(MODE STREQUAL "add_subdirectory")
  list(APPEND configure_args "-DEMBER_SOURCE_DIR=${EMBER_SOURCE_DIR}")
elseif(MODE STREQUAL "fetch_content")
  # A release tarball as a user downloads it: one top directory, the source tree inside.
  set(stage "${WORK_DIR}/stage/ember-src")
  file(MAKE_DIRECTORY "${stage}")
  foreach(item CMakeLists.txt CMakePresets.json LICENSE README.md cmake include tests tools examples)
    if(EXISTS "${EMBER_SOURCE_DIR}/${item}")
      file(COPY "${EMBER_SOURCE_DIR}/${item}" DESTINATION "${stage}"
        PATTERN "build" EXCLUDE)
    endif()
  endforeach()
  set(tarball "${WORK_DIR}/ember-src.tar.gz")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E tar czf "${tarball}" ember-src
    WORKING_DIRECTORY "${WORK_DIR}/stage" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[package.${MODE}] could not pack ${tarball}")
  endif()
  file(SHA256 "${tarball}" sha)
  list(APPEND configure_args "-DEMBER_TARBALL=${tarball}" "-DEMBER_TARBALL_SHA256=${sha}")
else()
  message(FATAL_ERROR "run_package_test.cmake: unknown MODE '${MODE}'")
endif()

run_step(configure "${CMAKE_COMMAND}" ${configure_args})
run_step(build "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${CONFIG}" --parallel 2)
set(program "${consumer_build}/${PROGRAM}")
if(NOT EXISTS "${program}" AND EXISTS "${consumer_build}/${CONFIG}/${PROGRAM}")
  set(program "${consumer_build}/${CONFIG}/${PROGRAM}")  # a multi-config generator
endif()
if(DEFINED README)
  message(STATUS "[package.${MODE}] run: ${program}")
  execute_process(COMMAND "${program}" RESULT_VARIABLE rc OUTPUT_VARIABLE output)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[package.${MODE}] step 'run' failed (result: ${rc})")
  endif()
  if(NOT output STREQUAL expected_output)
    message(FATAL_ERROR "[package.${MODE}] ${README} says the program prints\n${expected_output}"
      "but it printed\n${output}")
  endif()
else()
  run_step(run "${program}")
endif()
message(STATUS "[package.${MODE}] OK")
