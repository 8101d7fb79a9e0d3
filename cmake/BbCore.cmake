# The pure core (src/schedule, sim, model, advise: the standard library only) as the library
# bb_core (installed as bubblebench::core, cmake/BbInstall.cmake), the command line's lists and
# sweep (bench/cli/list.cpp) and the answers of sim, model, validate and advise as JSON
# (bench/query/, shared by the CLI and the Python module): what every build makes, the
# core-only one (-DBB_CORE_ONLY=ON, pip install .) too. Position-independent, so that the
# Python module (a shared object) links them.
file(GLOB BB_CORE_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/src/schedule/*.cpp
     ${CMAKE_SOURCE_DIR}/src/sim/*.cpp
     ${CMAKE_SOURCE_DIR}/src/model/*.cpp
     ${CMAKE_SOURCE_DIR}/src/advise/*.cpp)
add_library(bb_core STATIC ${BB_CORE_SOURCES})
add_library(bubblebench::core ALIAS bb_core)
# Installed headers keep their room folders under include/bubblebench/: both
# "schedule/schedule.hpp" and <bubblebench/schedule/schedule.hpp> find them.
target_include_directories(bb_core PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/src>
                                          $<INSTALL_INTERFACE:include/bubblebench>
                                          $<INSTALL_INTERFACE:include>)
target_compile_features(bb_core PUBLIC cxx_std_20)
target_link_libraries(bb_core PUBLIC Threads::Threads)

add_library(bb_lists STATIC ${CMAKE_SOURCE_DIR}/bench/cli/list.cpp)
target_include_directories(bb_lists PUBLIC ${CMAKE_SOURCE_DIR}/bench)
target_link_libraries(bb_lists PUBLIC bb_core)

file(GLOB BB_QUERY_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bench/query/*.cpp)
add_library(bb_query STATIC ${BB_QUERY_SOURCES})
target_link_libraries(bb_query PUBLIC bb_lists bb_core nlohmann_json::nlohmann_json)

set_target_properties(bb_core bb_lists bb_query PROPERTIES POSITION_INDEPENDENT_CODE ON)
set_target_properties(bb_core PROPERTIES EXPORT_NAME core)
