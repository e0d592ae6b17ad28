"""C++ name demangling for kernel names that a profiler stored mangled (nvprof does).

Uses __cxa_demangle from the C++ runtime already loaded by every Linux Python; when it is
not available the mangled name is kept.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from functools import lru_cache


@lru_cache(maxsize=1)
def _cxa_demangle():
    for name in ("stdc++", "c++"):
        path = ctypes.util.find_library(name)
        if not path:
            continue
        try:
            lib = ctypes.CDLL(path)
            fn = lib.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.free.argtypes = [ctypes.c_void_p]
        return fn, libc.free
    return None


# Longer names are kept mangled: real ones are far shorter (substitutions compress them),
# and the C++ runtime's demangler recurses on its input.
MAX_MANGLED = 16384
# Template nesting deeper than this is not unwrapped further by short_name().
MAX_NESTING = 100


def demangle(name: str) -> str:
    if not name.startswith("_Z") or len(name) > MAX_MANGLED or "\x00" in name:
        return name
    funcs = _cxa_demangle()
    if funcs is None:
        return name
    fn, free = funcs
    status = ctypes.c_int()
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if not ptr or status.value != 0:
        return name
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        free(ptr)


def short_name(demangled: str) -> str:
    """The bare function name, as nsys's shortName: no return type, namespaces, template
    arguments or parameters ("void at::native::f<4>(int)" -> "f")."""
    s = demangled
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):  # drop the parameter list: the first '(' outside templates
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    s = s[:cut]
    # Drop template arguments, keeping only the outer name.
    for _ in range(MAX_NESTING):
        if "<" not in s:
            break
        new = re.sub(r"<[^<>]*>", "", s)
        if new == s:
            break
        s = new
    s = s.split()[-1] if s.split() else s
    return s.split("::")[-1] or demangled
