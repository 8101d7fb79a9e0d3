# The git sha of the sources a build compiles, refreshed at every build rather than when CMake
# configures (a commit, checkout or edit after configuring would otherwise be recorded wrongly).
#
#   include(cmake/BbGitSha.cmake)
#   bb_git_sha_source(${CMAKE_BINARY_DIR}/generated/bb_git_sha.cpp)
#   add_library(x ... ${CMAKE_BINARY_DIR}/generated/bb_git_sha.cpp)
#   add_dependencies(x bb_git_sha)
#
# writes the source now (so it exists) and adds the target `bb_git_sha`, which runs at every
# build and rewrites the source only when the sha changes: then one small file recompiles.
# The source defines `const char* bb::build_git_sha()`: 12 hex digits of HEAD, with `-dirty`
# when tracked files differ from HEAD (untracked files do not count, as with
# `git describe --dirty`), or "unknown" when the source folder is not the top of a git work tree
# (an exported tarball, no git installed, a folder git refuses to read).
set(_BB_GIT_SHA_WRITER ${CMAKE_CURRENT_LIST_DIR}/bb_git_sha_write.cmake)

function(bb_git_sha_source out)
  find_package(Git QUIET)
  set(cmd ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUT=${out}
          -DGIT=${GIT_EXECUTABLE} -P ${_BB_GIT_SHA_WRITER})
  execute_process(COMMAND ${cmd})
  add_custom_target(bb_git_sha COMMAND ${cmd} BYPRODUCTS ${out} VERBATIM)
endfunction()
