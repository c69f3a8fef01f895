# SQLite (the embedded backend, core/storage/sqlite_storage.h) as the target
# mongoelector_sqlite3.
#
#  * Default: the installed libsqlite3 (find_package(SQLite3)), so that SQLite's security
#    fixes arrive with the system's updates.
#  * MONGOELECTOR_SQLITE_AMALGAMATION=DIR: sqlite3.c and sqlite3.h from DIR compiled into
#    a static library (hidden symbols), for the self-contained wheel
#    (tests/wheels/deps.sh makes DIR from Debian's SQLite source).
set(MONGOELECTOR_SQLITE_AMALGAMATION "" CACHE PATH
  "Directory with sqlite3.c and sqlite3.h to compile in instead of linking the installed libsqlite3")

if(MONGOELECTOR_SQLITE_AMALGAMATION)
  if(NOT EXISTS "${MONGOELECTOR_SQLITE_AMALGAMATION}/sqlite3.c")
    message(FATAL_ERROR "MONGOELECTOR_SQLITE_AMALGAMATION: no sqlite3.c in ${MONGOELECTOR_SQLITE_AMALGAMATION}")
  endif()
  add_library(mongoelector_sqlite3 STATIC "${MONGOELECTOR_SQLITE_AMALGAMATION}/sqlite3.c")
  target_include_directories(mongoelector_sqlite3 SYSTEM PUBLIC "${MONGOELECTOR_SQLITE_AMALGAMATION}")
  # No loadable extensions (no dlopen); otherwise SQLite's defaults, as the system's build.
  target_compile_definitions(mongoelector_sqlite3 PRIVATE SQLITE_OMIT_LOAD_EXTENSION SQLITE_THREADSAFE=1)
  find_package(Threads REQUIRED)
  target_link_libraries(mongoelector_sqlite3 PUBLIC Threads::Threads m)
  message(STATUS "mongoelector: SQLite compiled from ${MONGOELECTOR_SQLITE_AMALGAMATION}")
else()
  find_package(SQLite3 QUIET)
  if(NOT TARGET SQLite::SQLite3)
    message(FATAL_ERROR
      "SQLite 3 was not found. Install its development files:\n"
      "  Debian/Ubuntu:  apt-get install libsqlite3-dev\n"
      "  Fedora/RHEL:    dnf install sqlite-devel\n"
      "  Homebrew:       brew install sqlite\n"
      "or compile the SQLite amalgamation in: -DMONGOELECTOR_SQLITE_AMALGAMATION=DIR "
      "(a directory with sqlite3.c and sqlite3.h).")
  endif()
  add_library(mongoelector_sqlite3 INTERFACE)
  target_link_libraries(mongoelector_sqlite3 INTERFACE SQLite::SQLite3)
endif()
