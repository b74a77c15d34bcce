"""Names: the CMake package name, the C prefix, and C identifiers for tensor names.

Tensor names in models are arbitrary strings (``input:0``, ``1``, ``a.b``); the generated
code needs identifiers that are valid in C and C++, unique within their table, and unique
once upper-cased (they also become macro names). The original names stay in the I/O table.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from relay2cmake.errors import UserError

# C99/C11 and C++17/20 keywords, plus names the standard headers may define as macros.
RESERVED = frozenset(
    """
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic
    _Generic _Noreturn _Static_assert _Thread_local alignas alignof and and_eq asm bitand bitor
    bool catch char8_t char16_t char32_t class compl concept consteval constexpr constinit
    const_cast co_await co_return co_yield decltype delete dynamic_cast explicit export false
    friend mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected
    public reinterpret_cast requires static_assert static_cast template this thread_local throw
    true try typeid typename using virtual wchar_t xor xor_eq errno assert NULL EOF stdin stdout
    stderr offsetof main
    """.split()
)

# Members of the C++ wrapper's per-tensor structs and its own names: an input called `shape`
# would declare `struct shape { ... shape ... }`, one called `std` would hide namespace std.
WRAPPER_NAMES = frozenset(
    "type name index shape num_elements bytes dynamic_axis".split()
    + "std Span Error Inputs Outputs OutputVectors Model".split()
)


@functools.cache
def _library_names() -> tuple[frozenset[str], frozenset[str]]:
    """(object-like macros, other names) of the C library headers: c_library_names.txt."""
    macros: set[str] = set()
    others: set[str] = set()
    current = macros
    for line in (Path(__file__).parent / "c_library_names.txt").read_text().splitlines():
        if line.startswith("# [other names]"):
            current = others
        elif line and not line.startswith("#"):
            current.add(line)
    return frozenset(macros), frozenset(others)


def _is_library_name(name: str) -> bool:
    """Declared by the C library headers (POSIX reserves every ``*_t``), or C++'s ``std``."""
    macros, others = _library_names()
    return name in macros or name in others or name.endswith("_t") or name == "std"


# fullmatch, not match with "$": "$" also matches before a trailing newline ("1.0.0\n").
_PACKAGE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# Semantic versioning: MAJOR.MINOR.PATCH, then an optional -pre-release and +build.
_IDENTIFIERS = r"[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*"
_VERSION = re.compile(
    rf"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-{_IDENTIFIERS})?(\+{_IDENTIFIERS})?"
)
# Library names the linker already knows: a target "m" would link to itself instead of libm.
SYSTEM_LIBRARIES = frozenset({"c", "m", "dl", "rt", "pthread", "util", "gcc", "gcc_s", "atomic", "stdc"})


def package_name_from_path(stem: str) -> str:
    """Derive a CMake package name from a file stem: ``resnet-50_v2`` → ``Resnet50V2``."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", stem) if p]
    name = "".join(p[:1].upper() + p[1:] for p in parts)
    if not name or not name[0].isalpha():
        name = "Model" + name
    prefix = c_prefix(name)
    if prefix in SYSTEM_LIBRARIES or prefix in RESERVED or _is_library_name(prefix):
        name = name + "Model"  # m.onnx → MModel, not a target "m" that shadows libm
    return name


def check_package_name(name: str) -> str:
    if not _PACKAGE_NAME.fullmatch(name) or len(name) > 64 or "__" in name:
        raise UserError(
            f"--name {name!r} is not a valid package name: use 1-64 letters, digits and "
            "single underscores, starting with a letter (for example --name MyModel)."
        )
    if c_prefix(name) in RESERVED:
        raise UserError(
            f"--name {name!r} gives the C prefix {c_prefix(name)!r}, a reserved word; choose another."
        )
    if c_prefix(name) in SYSTEM_LIBRARIES:
        raise UserError(
            f"--name {name!r} gives the library name {c_prefix(name)!r}, which is a system library "
            "(the link would go to the wrong one); choose another."
        )
    if _is_library_name(c_prefix(name)):
        raise UserError(
            f"--name {name!r} gives the C prefix {c_prefix(name)!r}, a name the C library already "
            "declares (the C++ namespace and the library would clash with it); choose another."
        )
    return name


def check_version(version: str) -> str:
    if not _VERSION.fullmatch(version):
        raise UserError(
            f"--version {version!r} is not a version X.Y.Z (three numbers, then optionally "
            "-pre-release and +build: 1.0.0, 2.1.0-rc.1, 1.0.0+build.5)."
        )
    return version


def cmake_version(version: str) -> str:
    """What CMake's ``project(VERSION)`` takes of a checked version: ``X.Y.Z``."""
    return re.split(r"[-+]", version, maxsplit=1)[0]


def c_prefix(package_name: str) -> str:
    """The lowercase C prefix of every generated symbol: ``MyModel`` → ``mymodel``."""
    return package_name.lower()


def _sanitize(name: str) -> str:
    # "__" anywhere is reserved to the implementation in C++ ("FLOAT__INDEX").
    ident = re.sub(r"__+", "_", re.sub(r"[^A-Za-z0-9_]", "_", name))
    if not ident or ident[0].isdigit():
        ident = "t_" + ident
    if ident.startswith("_"):
        # Leading underscores are reserved to the implementation in C.
        ident = "t" + ident
    if ident in RESERVED or ident in WRAPPER_NAMES or ident in _library_names()[0]:
        ident += "_"  # a keyword, a wrapper member, or a macro (linux, INT8_MAX)
    return ident


def unique_identifiers(names: list[str]) -> list[str]:
    """C identifiers for ``names``, in order, unique even when upper-cased.

    Names that are already good identifiers keep their spelling; the others are sanitised
    and, when that collides, get the smallest free ``_2``, ``_3``... suffix. The result only
    depends on the list, so generation stays deterministic.
    """
    result: list[str | None] = [None] * len(names)
    taken: set[str] = set()
    # First pass: names that need no change claim their spelling first.
    for i, name in enumerate(names):
        if _sanitize(name) == name and name.upper() not in taken:
            result[i] = name
            taken.add(name.upper())
    for i, name in enumerate(names):
        if result[i] is not None:
            continue
        base = _sanitize(name)
        candidate, n = base, 2
        while candidate.upper() in taken:
            candidate, n = f"{base}_{n}", n + 1
        result[i] = candidate
        taken.add(candidate.upper())
    return [r for r in result if r is not None]


def c_string_literal(text: str) -> str:
    """A C string literal (with quotes) that reproduces ``text`` as UTF-8 bytes."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= byte < 127 and ch != "?":  # '?' could start a trigraph
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def comment_text(text: str) -> str:
    """``text`` made safe inside a ``/* */``, ``//`` or ``#`` comment: one line, no
    terminator or opener (``-Wcomment``), no backslash (a ``//`` line continuation), and only
    printable ASCII (bidi controls would trip ``-Wbidi-chars``); other characters become ``?``."""
    printable = "".join(ch if " " <= ch <= "~" else "?" for ch in text)
    return printable.replace("*/", "* /").replace("/*", "/ *").replace("\\", "/")


# Enough for text inside a list item: no emphasis, code, links, HTML, tables or headings.
_MARKDOWN_SPECIAL = set("\\`*_{}[]<>#|~&")


def markdown_text(text: str) -> str:
    """``text`` as one line of literal Markdown: every character Markdown or HTML could read
    as syntax is backslash-escaped, control characters become spaces, and invisible format
    characters (bidi overrides: text that reads differently from how it runs) become ``?``."""
    import unicodedata

    out = []
    for ch in text:
        if ch in _MARKDOWN_SPECIAL:
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(" ")
        elif unicodedata.category(ch) == "Cf":
            out.append("?")
        else:
            out.append(ch)
    return "".join(out)


def file_label(text: str, limit: int = 120) -> str:
    """A file name reduced to characters that mean nothing in any generated file's language
    (C and CMake comments, Python strings, Markdown, HTML comments): letters, digits and
    ``._+-``; anything else becomes ``_``. The model's sha256 identifies it; this only reads."""
    label = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "._+-" else "_" for ch in text)
    return label[:limit] or "_"


def terminal_text(text: str) -> str:
    """``text`` safe to print: control characters other than newline and tab (terminal
    escape sequences start with one) and invisible format characters become ``?``."""
    import unicodedata

    return "".join(ch if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf") else "?" for ch in text)
