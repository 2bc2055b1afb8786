# Writes the commit wort is built from into a C++ source file: wort::bench::BuildGitCommit(), the
# `git_commit` of the bench records (src/bench/bench.cc). The wort_git_commit target
# (CMakeLists.txt) runs it at every build:
#   cmake -DSOURCE_DIR=<wort's source tree> -DOUTPUT=<file.cc> [-DGIT=<git>] -P git_commit.cmake
# The value is HEAD's hash (12 hex digits) with "-dirty" appended when tracked files differ from
# HEAD, or "unknown" when SOURCE_DIR is not the top of a git checkout (a release tarball, or wort
# copied into another project's repository) or there is no git. OUTPUT is rewritten only when
# the value changes, so a build at the same commit recompiles nothing.
set(commit unknown)
if(GIT)
  execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse --show-toplevel
                  RESULT_VARIABLE rc OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0)
    file(REAL_PATH "${top}" top)
    file(REAL_PATH "${SOURCE_DIR}" src)
  endif()
  if(rc EQUAL 0 AND top STREQUAL src)
    execute_process(COMMAND ${GIT} -C ${SOURCE_DIR} rev-parse --short=12 HEAD
                    RESULT_VARIABLE rc OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rc EQUAL 0 AND head MATCHES "^[0-9a-f]+$")
      set(commit ${head})
      # --no-optional-locks: no index refresh written beside a git command the user runs.
      execute_process(COMMAND ${GIT} --no-optional-locks -C ${SOURCE_DIR} status --porcelain --untracked-files=no
                      RESULT_VARIABLE rc OUTPUT_VARIABLE changes ERROR_QUIET)
      if(NOT rc EQUAL 0 OR NOT changes STREQUAL "")
        string(APPEND commit -dirty)
      endif()
    endif()
  endif()
endif()
file(CONFIGURE OUTPUT ${OUTPUT} CONTENT [[
// Generated at build time by cmake/git_commit.cmake; do not edit.
namespace wort::bench {
const char* BuildGitCommit() { return "@commit@"; }
}  // namespace wort::bench
]] @ONLY)
