// What this binary was built from. build_git_sha() is generated at every build
// (cmake/BbGitSha.cmake): HEAD's sha of the sources compiled, `-dirty` with uncommitted changes
// to tracked files, "unknown" outside a git work tree.
#pragma once

namespace bb {
const char* build_git_sha();
}  // namespace bb
