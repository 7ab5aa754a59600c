# Cross-compiles docpipe.exe for 64-bit Windows with Debian's mingw-w64 (docs/build.md):
#
#   bash cmake/windows-deps.sh                     # libyaml, jansson, sqlite, cmocka for Windows
#   cmake -S . -B build-win -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake
#   cmake --build build-win -j
#
# The libraries the script cross-builds live under DP_WIN_DEPS (default build-win-deps/prefix in
# the source tree); zlib comes from Debian's libz-mingw-w64-dev. The executables are linked
# statically, so docpipe.exe runs on a Windows machine (and under wine) with no DLLs beside it.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(DP_MINGW x86_64-w64-mingw32)
# the "-posix" flavour is not needed: docpipe's threads are Win32 threads (platform_win32.c)
find_program(CMAKE_C_COMPILER NAMES ${DP_MINGW}-gcc-win32 ${DP_MINGW}-gcc REQUIRED)
find_program(CMAKE_RC_COMPILER NAMES ${DP_MINGW}-windres)

get_filename_component(dp_src "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
# (kept in the environment too: try_compile reads this file again without the cache)
if(NOT DP_WIN_DEPS)
    if(DEFINED ENV{DP_WIN_DEPS})
        set(DP_WIN_DEPS "$ENV{DP_WIN_DEPS}")
    else()
        set(DP_WIN_DEPS "${dp_src}/build-win-deps/prefix")
    endif()
endif()
set(ENV{DP_WIN_DEPS} "${DP_WIN_DEPS}")
set(DP_WIN_DEPS "${DP_WIN_DEPS}" CACHE PATH "Prefix holding the cross-built libyaml, jansson, sqlite and cmocka")

set(CMAKE_FIND_ROOT_PATH /usr/${DP_MINGW} ${DP_WIN_DEPS})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config looks only at the cross-built libraries' .pc files, never at the host's
set(ENV{PKG_CONFIG_LIBDIR} "${DP_WIN_DEPS}/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# one self-contained .exe: the C runtime's helpers and every library linked in
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -static-libgcc")

# ctest runs the test programs through wine (a Linux build host) or directly (a Windows host)
if(CMAKE_HOST_UNIX)
    find_program(DP_WINE NAMES wine64 wine)
    if(DP_WINE)
        set(CMAKE_CROSSCOMPILING_EMULATOR ${DP_WINE})
    endif()
endif()
