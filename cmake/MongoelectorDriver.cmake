# The MongoDB C driver as the INTERFACE target mongoelector_mongoc (what the core links).
#
#  * Default: the installed shared driver, 1.x (package mongoc-1.0, target
#    mongo::mongoc_shared) or 2.x (package mongoc, target mongoc::shared).
#  * MONGOELECTOR_STATIC_DRIVER=PREFIX: a static build installed in PREFIX (1.x built with
#    ENABLE_STATIC=ON: mongo::mongoc_static; 2.x: mongoc::static), e.g. the one
#    tests/wheels/deps.sh makes for the self-contained wheel. Nothing else is searched.
#    The shared objects that link it export none of its symbols (version scripts).
set(MONGOELECTOR_STATIC_DRIVER "" CACHE PATH
  "Prefix of a static mongo-c-driver build to link instead of the installed shared driver")

if(MONGOELECTOR_STATIC_DRIVER)
  # First in the prefix path, so that the driver's own find_dependency() calls (bson,
  # OpenSSL) also resolve in PREFIX rather than in the system.
  list(PREPEND CMAKE_PREFIX_PATH "${MONGOELECTOR_STATIC_DRIVER}")
  set(OPENSSL_ROOT_DIR "${MONGOELECTOR_STATIC_DRIVER}")
  set(OPENSSL_USE_STATIC_LIBS ON)
  find_package(mongoc-1.0 1.17 CONFIG QUIET PATHS "${MONGOELECTOR_STATIC_DRIVER}" NO_DEFAULT_PATH)
  if(TARGET mongo::mongoc_static)
    set(_mongoelector_driver mongo::mongoc_static)
  else()
    find_package(mongoc 2 CONFIG QUIET PATHS "${MONGOELECTOR_STATIC_DRIVER}" NO_DEFAULT_PATH)
    if(TARGET mongoc::static)
      set(_mongoelector_driver mongoc::static)
    endif()
  endif()
  if(NOT _mongoelector_driver)
    message(FATAL_ERROR
      "MONGOELECTOR_STATIC_DRIVER=${MONGOELECTOR_STATIC_DRIVER} holds no static mongo-c-driver "
      "(CMake package mongoc-1.0 with mongo::mongoc_static, or mongoc with mongoc::static). "
      "Build one with ENABLE_STATIC=ON, or run `bash tests/wheels/deps.sh` in a clone of "
      "mongoelector and pass the prefix it prints.")
  endif()
else()
  find_package(mongoc-1.0 1.17 CONFIG QUIET)
  if(TARGET mongo::mongoc_shared)
    set(_mongoelector_driver mongo::mongoc_shared)
  else()
    find_package(mongoc 2 CONFIG QUIET)
    if(TARGET mongoc::shared)
      set(_mongoelector_driver mongoc::shared)
      # The name the test suites link.
      add_library(mongo::mongoc_shared ALIAS mongoc::shared)
    endif()
  endif()
  if(NOT _mongoelector_driver)
    message(FATAL_ERROR
      "The MongoDB C driver (libmongoc >= 1.17, 1.x or 2.x) was not found. Install its "
      "development files:\n"
      "  Debian/Ubuntu:  apt-get install libmongoc-dev\n"
      "  Fedora/RHEL:    dnf install mongo-c-driver-devel\n"
      "  Homebrew:       brew install mongo-c-driver\n"
      "or point CMake at an installed copy (-DCMAKE_PREFIX_PATH=PREFIX), or link a static "
      "build of it instead: -DMONGOELECTOR_STATIC_DRIVER=PREFIX (with pip: "
      "pip install . -C cmake.define.MONGOELECTOR_STATIC_DRIVER=PREFIX); "
      "`bash tests/wheels/deps.sh` in a clone of mongoelector builds one and prints PREFIX.")
  endif()
endif()

message(STATUS "mongoelector: MongoDB C driver ${_mongoelector_driver}")
add_library(mongoelector_mongoc INTERFACE)
target_link_libraries(mongoelector_mongoc INTERFACE ${_mongoelector_driver})
