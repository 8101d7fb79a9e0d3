# The Python module `bubblebench` (bench/python/module.cpp, pybind11) in ${CMAKE_BINARY_DIR}/python
# (PYTHONPATH=build/python; README "From Python"), and its tests. Optional like CUDA: without
# pybind11 or Python's headers it is left out with a status line. Left out of the sanitizer
# build on purpose: an extension compiled with ASan loads only into a Python started with
# libasan preloaded, whose own allocations the leak checker then reports; the same code
# (bench/query/) runs sanitized through the CLI's tests there.
set(BB_HAVE_PYTHON_MODULE OFF)
if(BB_SANITIZE)
  message(STATUS "bubblebench: Python module OFF (sanitizer build: see cmake/BbPython.cmake)")
  return()
endif()
if(NOT Python3_EXECUTABLE AND BB_PYTHON)
  set(Python3_EXECUTABLE ${BB_PYTHON})  # Debian's, as the analysis (not the first on PATH)
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
if(Python3_FOUND)
  find_package(pybind11 CONFIG QUIET)
endif()
if(NOT Python3_FOUND OR NOT pybind11_FOUND)
  message(STATUS "bubblebench: Python module OFF (needs pybind11 and Python's headers: "
                 "apt-get install pybind11-dev python3-dev)")
  return()
endif()
set(BB_HAVE_PYTHON_MODULE ON)
message(STATUS "bubblebench: Python module ON (${Python3_EXECUTABLE}, pybind11 ${pybind11_VERSION})")
pybind11_add_module(bb_python MODULE NO_EXTRAS ${CMAKE_SOURCE_DIR}/bench/python/module.cpp)
target_link_libraries(bb_python PRIVATE bb_query)
target_compile_definitions(bb_python PRIVATE BB_VERSION="${PROJECT_VERSION}")
set_target_properties(bb_python PROPERTIES OUTPUT_NAME bubblebench
                                           LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/python)
if(SKBUILD)  # pip install . (pyproject.toml): the module at the top of site-packages
  install(TARGETS bb_python LIBRARY DESTINATION . COMPONENT python)
endif()

if(TARGET bubblebench)
  # The module against the CLI on a grid of every schedule, and its own behaviour.
  add_test(NAME python.module
           COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider
                   ${CMAKE_SOURCE_DIR}/tests/python
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(python.module PROPERTIES
    TIMEOUT 300
    ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;BB_BUBBLEBENCH=$<TARGET_FILE:bubblebench>")
endif()
if(TEST analysis.pytest)  # the analysis draws its simulator lines through the module
  set_property(TEST analysis.pytest APPEND PROPERTY ENVIRONMENT
               "PYTHONPATH=${CMAKE_BINARY_DIR}/python")
endif()
