# Run at every build of `kvg` (cli/CMakeLists.txt): writes OUT, a header
# naming the commit the sources were built from, and rewrites it only when
# that changes, so an unchanged tree recompiles nothing. KVG_GIT_COMMIT, when
# set (a source package without .git), wins; "unknown" where neither is known.
set(commit "${KVG_GIT_COMMIT}")
if(NOT commit)
  execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
  if(failed OR NOT commit)
    set(commit unknown)
  else()
    # Built from edited sources: the commit alone would claim too much.
    execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(changes)
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()
set(text "// Written by cli/build_commit.cmake at build time.\n#define KVG_BUILD_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
