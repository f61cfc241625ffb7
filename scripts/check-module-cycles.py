#!/usr/bin/env python3
"""Checks that the module import graph inside every crate of the workspace is a DAG.

Nodes are a crate's module files under `src/` (`foo.rs` and `foo/mod.rs` are the module `foo`;
a `foo.rs` beside a folder `foo/` is the parent of `foo/*.rs`), found by following the `mod`
declarations from the crate root (`lib.rs`, else `main.rs`). `src/bin/`, `tests/`, `benches/`
and a `main.rs` beside a `lib.rs` are other crates and are not read. An edge A -> B means that
A's code names an item of module B through a path:

* `use crate::x::y`, `use super::..`, `use self::..`, `use child::..` (groups and multi-line
  statements included), and the same paths anywhere in code (`crate::x::f()`), resolved to the
  deepest module file that exists;
* a path through a module imported by name (`use super::graph; .. graph::plan()`) resolves to
  the module it reaches (the import alone is an edge only if the alias is never used);
* a name that a module re-exports or imports (`pub use conv::conv2d` in `cudnn/mod.rs`,
  `pub use error::Error` in `lib.rs`) resolves to the module that defines it, so
  `crate::Error` is an edge to `error.rs`, not to `lib.rs`; names imported from other crates
  are no edge at all;
* a `pub use` (any `pub(..)`) in a module of items of its own descendants is a table of
  contents, not a dependency: no edge, unless the module's own code uses the re-exported name
  (then it is one, shown as the line of that use). Its `mod child;` lines are no edge either.

Comments, string literals, attributes and anything under `#[cfg(test)]` (test modules, test
helpers, test-only `use` lines and `mod tests;` files) are ignored.

Exits 1 printing every cycle (a chain of file paths), grouped by the sets of files that reach
each other, with the lines that make each edge inside a set (break a cycle at one of them); 0
with a one-line summary otherwise. `--crate NAME` checks one crate (package or folder name),
`--verbose` prints every edge, `--root DIR` checks another workspace. `--folders`, for
information, collapses each top-level module with everything under its folder into one node
(cycles between `train_config.rs` and the `train/` folder as a whole, say). Standard library
only: `python3 scripts/check-module-cycles.py`; its tests: `python3
scripts/test_check_module_cycles.py`.
"""

import argparse
import fnmatch
import glob
import os
import re
import signal
import sys
from collections import defaultdict

try:
    import tomllib
except ImportError:  # Python < 3.11: the few keys needed are read with regular expressions.
    tomllib = None

SKIPPED_TOP = ("vendor", "fuzz", "target")
MAX_CYCLES_PER_SCC = 500
MAX_SEARCH_STEPS = 2_000_000

# --------------------------------------------------------------------------------------------
# Lexing: comments and literals out, line numbers kept.

IDENT_START = re.compile(r"[A-Za-z_]")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMBER = re.compile(r"[0-9][0-9A-Za-z_]*(\.[0-9][0-9A-Za-z_]*)?")
RAW_STR = re.compile(r'(?:b|c)?r(#*)"')


class Tok:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind = kind  # "id", "p" (punctuation), "str", "lit"
        self.text = text
        self.line = line

    def __repr__(self):
        return f"{self.kind}:{self.text}@{self.line}"


def lex(src):
    """Rust source to tokens: identifiers, `::`, single punctuation, string literals (their
    text kept, for `#[path]`), other literals; comments dropped."""
    toks = []
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if src[i] == "\n":
                        line += 1
                    i += 1
            continue
        m = RAW_STR.match(src, i) if c in "bcr" else None
        if m:
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j
            text = src[m.end():j]
            toks.append(Tok("str", text, line))
            line += text.count("\n")
            i = j + len(end)
            continue
        if c == '"' or (c in "bc" and src.startswith('"', i + 1)):
            start_line = line
            i += 1 if c == '"' else 2
            buf = []
            while i < n and src[i] != '"':
                if src[i] == "\\":
                    buf.append(src[i:i + 2])
                    if src[i + 1:i + 2] == "\n":
                        line += 1
                    i += 2
                    continue
                if src[i] == "\n":
                    line += 1
                buf.append(src[i])
                i += 1
            i += 1
            toks.append(Tok("str", "".join(buf), start_line))
            continue
        if c == "'" or (c == "b" and src.startswith("'", i + 1)):
            k = i + (1 if c == "'" else 2)
            # A character literal: an escape, or one character then a quote. Else a lifetime.
            if k < n and src[k] == "\\":
                j = src.find("'", k + 2)
                if j >= 0:
                    toks.append(Tok("lit", "'c'", line))
                    i = j + 1
                    continue
            elif k + 1 < n and src[k + 1] == "'" and src[k] != "\n":
                toks.append(Tok("lit", "'c'", line))
                i = k + 2
                continue
            if c == "'":
                m = IDENT.match(src, i + 1)
                if m:
                    toks.append(Tok("lit", "'" + m.group(0), line))  # lifetime or label
                    i = m.end()
                    continue
                toks.append(Tok("p", "'", line))
                i += 1
                continue
        if c == "r" and src.startswith("r#", i) and IDENT_START.match(src, i + 2 if i + 2 < n else i):
            m = IDENT.match(src, i + 2)
            if m:
                toks.append(Tok("id", m.group(0), line))
                i = m.end()
                continue
        if IDENT_START.match(c):
            m = IDENT.match(src, i)
            toks.append(Tok("id", m.group(0), line))
            i = m.end()
            continue
        if c.isdigit():
            m = NUMBER.match(src, i)
            toks.append(Tok("lit", m.group(0), line))
            i = m.end()
            continue
        if c == "$" and IDENT_START.match(src, i + 1 if i + 1 < n else i):
            m = IDENT.match(src, i + 1)
            if m and m.group(0) == "crate":
                toks.append(Tok("id", "$crate", line))
                i = m.end()
                continue
        if src.startswith("::", i):
            toks.append(Tok("p", "::", line))
            i += 2
            continue
        toks.append(Tok("p", c, line))
        i += 1
    return toks


# --------------------------------------------------------------------------------------------
# Scanning one file: its module declarations, `use` trees, paths in code, items, identifiers.

ITEM_KEYWORDS = {
    "fn", "struct", "enum", "impl", "trait", "mod", "use", "const", "static", "type", "union",
    "unsafe", "extern", "async", "macro_rules", "auto", "default",
}
DEFINING = {"fn", "struct", "enum", "trait", "type", "const", "static", "union"}
KEYWORDS = {
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
    "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true",
    "type", "unsafe", "use", "where", "while", "union", "macro_rules", "$crate", "gen",
}
PATH_ROOTS = {"crate", "$crate", "super", "self"}
OPEN = {"(": ")", "[": "]", "{": "}"}
CLOSE = {")", "]", "}"}


class UseLeaf:
    __slots__ = ("segs", "name", "glob", "line", "text")

    def __init__(self, segs, name, is_glob, line):
        self.segs = segs  # the full path, `self` in a group folded away
        self.name = name  # the name it binds (None for globs and `as _`)
        self.glob = is_glob
        self.line = line
        self.text = "::".join(segs) + ("::*" if is_glob else "")


class UseDecl:
    __slots__ = ("leaves", "pub", "module_level", "scope", "line")

    def __init__(self, leaves, pub, module_level, scope, line):
        self.leaves, self.pub, self.module_level, self.scope, self.line = (
            leaves, pub, module_level, scope, line)


class FileScan:
    """What one file says, each fact with the inline-module scope (a tuple of names) it is in."""

    def __init__(self, path, toks):
        self.path = path
        self.toks = toks
        self.test_only = False
        self.unbalanced = False
        self.mods = []  # (name, line, scope, inline, path_attr)
        self.test_mods = []  # (name, line, scope): `#[cfg(test)] mod x;` files, not read
        self.uses = []  # UseDecl
        self.paths = []  # (segs, line, scope) in code
        self.items = defaultdict(set)  # scope -> names defined there at module level
        self.idents = []  # (name, line, scope, prev, next): bare identifiers in code
        self.scan()

    # -- helpers over the token list
    def t(self, i):
        return self.toks[i].text if i < len(self.toks) else ""

    def skip_group(self, i):
        """Index after the bracketed group opening at i."""
        depth = 0
        while i < len(self.toks):
            x = self.toks[i].text if self.toks[i].kind == "p" else None
            if x in OPEN:
                depth += 1
            elif x in CLOSE:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return i

    def skip_test_item(self, i):
        """Index after the item or statement at i (under `#[cfg(test)]`)."""
        j = i
        if self.t(j) == "pub":
            j += 1
            if self.t(j) == "(":
                j = self.skip_group(j)
        first = self.t(j)
        is_item = self.toks[j].kind == "id" and first in ITEM_KEYWORDS if j < len(self.toks) else False
        semicolon_only = first in ("use", "const", "static", "type")
        k = i
        while k < len(self.toks):
            tok = self.toks[k]
            x = tok.text if tok.kind == "p" else None
            if x in CLOSE:
                return k  # the enclosing block ends: leave its brace
            if x == ";":
                return k + 1
            if x == "," and not is_item:
                return k + 1
            if x in OPEN:
                end = self.skip_group(k)
                if x == "{" and is_item and not semicolon_only:
                    return end
                k = end
                continue
            k += 1
        return k

    @staticmethod
    def is_cfg_test(attr):
        s = "".join(tok.text for tok in attr)
        if s == "cfg(test)":
            return True
        m = re.fullmatch(r"cfg\(all\((.*)\)\)", s)
        if m:
            depth, parts, cur = 0, [], ""
            for ch in m.group(1):
                if ch == "," and depth == 0:
                    parts.append(cur)
                    cur = ""
                    continue
                depth += ch == "("
                depth -= ch == ")"
                cur += ch
            parts.append(cur)
            return "test" in parts
        return False

    def parse_use(self, i, pub, module_level, scope):
        """Parses the `use` tree after the `use` at i; returns the index after its `;`."""
        line = self.toks[i].line
        i += 1
        leaves = []
        external = False
        if self.t(i) == "::":
            external = True
            i += 1

        def tree(i, prefix):
            text = self.t(i)
            if text == "{":
                i += 1
                while i < len(self.toks) and self.t(i) != "}":
                    i = tree(i, prefix)
                    if self.t(i) == ",":
                        i += 1
                return i + 1
            if text == "*":
                leaves.append(UseLeaf(list(prefix), None, True, self.toks[i].line))
                return i + 1
            segs = list(prefix)
            while i < len(self.toks) and self.toks[i].kind == "id":
                segs.append(self.toks[i].text)
                seg_line = self.toks[i].line
                i += 1
                if self.t(i) == "::":
                    i += 1
                    if self.t(i) in ("{", "*"):
                        return tree(i, segs)
                    continue
                name = segs[-1]
                if self.t(i) == "as":
                    name = self.t(i + 1)
                    i += 2
                if segs[-1] == "self":
                    segs.pop()
                    if name == "self":
                        name = segs[-1] if segs else None
                leaves.append(UseLeaf(segs, None if name == "_" else name, False, seg_line))
                return i
            return i + 1  # something unexpected: step over it

        while i < len(self.toks) and self.t(i) != ";":
            before = i
            i = tree(i, [])
            if i == before:
                i += 1
        if not external and leaves:
            self.uses.append(UseDecl(leaves, pub, module_level, scope, line))
        return i + 1

    def parse_path(self, i):
        """The path starting at i (`a::b::c`, stopping before generics, groups and `*`)."""
        segs = [self.toks[i].text]
        j = i + 1
        while self.t(j) == "::" and j + 1 < len(self.toks) and self.toks[j + 1].kind == "id":
            segs.append(self.toks[j + 1].text)
            j += 2
        return segs, j

    def scan(self):
        toks = self.toks
        n = len(toks)
        stack = []  # ("mod", name) or ("block", None)
        pending_mod = None  # the name of an inline `mod x {` about to open
        pending_pub = False
        pending_path = None
        i = 0
        while i < n:
            tok = toks[i]
            x = tok.text
            scope = tuple(name for kind, name in stack if kind == "mod")
            module_level = all(kind == "mod" for kind, _ in stack)
            # attributes
            if tok.kind == "p" and x == "#" and self.t(i + 1) in ("[", "!"):
                inner = self.t(i + 1) == "!"
                open_at = i + 2 if inner else i + 1
                if self.t(open_at) != "[":
                    i += 1
                    continue
                end = self.skip_group(open_at)
                attr = toks[open_at + 1:end - 1]
                test = self.is_cfg_test(attr)
                if not inner and len(attr) == 3 and attr[0].text == "path" and attr[2].kind == "str":
                    pending_path = attr[2].text
                i = end
                if inner and test and not stack:
                    self.test_only = True
                    return
                if test and not inner:
                    # further attributes of the same item
                    while self.t(i) == "#" and self.t(i + 1) == "[":
                        i = self.skip_group(i + 1)
                    if self.t(i) == "mod" or (self.t(i) == "pub" and "mod" in [
                            self.t(k) for k in range(i + 1, min(i + 6, n))]):
                        k = i
                        while k < n and self.t(k) != "mod":
                            k += 1
                        if k + 2 < n and self.t(k + 2) == ";":
                            self.test_mods.append((self.t(k + 1), toks[k].line, scope))
                    i = self.skip_test_item(i)
                    pending_pub = False
                    pending_path = None
                continue
            if tok.kind == "p":
                if x == "{":
                    stack.append(("mod", pending_mod) if pending_mod else ("block", None))
                    pending_mod = None
                elif x == "}":
                    if stack:
                        stack.pop()
                elif x == ";":
                    pending_path = None
                pending_pub = False
                i += 1
                continue
            if tok.kind != "id":
                pending_pub = False
                i += 1
                continue
            if x == "pub":
                pending_pub = True
                i += 1
                if self.t(i) == "(":
                    i = self.skip_group(i)
                continue
            if x == "use" and self.t(i + 1) != "<":
                i = self.parse_use(i, pending_pub, module_level, scope)
                pending_pub = False
                continue
            pending_pub = False
            if x == "mod" and i + 2 < n and toks[i + 1].kind == "id":
                name = toks[i + 1].text
                if module_level:
                    self.items[scope].add(name)
                if self.t(i + 2) == ";":
                    if module_level:
                        self.mods.append((name, tok.line, scope, False, pending_path))
                    pending_path = None
                    i += 3
                    continue
                if self.t(i + 2) == "{":
                    if module_level:
                        self.mods.append((name, tok.line, scope, True, None))
                    pending_mod = name
                    pending_path = None
                    i += 2
                    continue
            if module_level and x in DEFINING and i + 1 < n and toks[i + 1].kind == "id":
                name = toks[i + 1].text
                if x == "static" and name == "mut" and i + 2 < n:
                    name = toks[i + 2].text
                if not (x == "const" and name in ("fn", "unsafe", "async", "extern")):
                    self.items[scope].add(name)
            if module_level and x == "macro_rules" and self.t(i + 1) == "!" and i + 2 < n:
                self.items[scope].add(toks[i + 2].text)
            prev = toks[i - 1].text if i else ""
            if prev in ("::", "."):
                i += 1
                continue
            nxt = self.t(i + 1)
            if nxt == "::" and i + 2 < n and toks[i + 2].kind == "id" and x not in ("Self",):
                segs, j = self.parse_path(i)
                self.paths.append((segs, tok.line, scope))
                if x not in KEYWORDS:
                    self.idents.append((x, tok.line, scope, prev, nxt))
                i = j
                continue
            if x not in KEYWORDS:
                self.idents.append((x, tok.line, scope, prev, nxt))
            i += 1
        self.unbalanced = bool(stack)


# --------------------------------------------------------------------------------------------
# The module tree of one crate, and name resolution.


class Module:
    def __init__(self, path, file, parent, inline=False, line=None):
        self.path = path  # tuple of names from the crate root
        self.file = file  # relative file path (an inline module: its file's)
        self.parent = parent
        self.inline = inline
        self.line = line
        self.children = {}
        self.items = set()
        self.ns = {}  # name -> (UseLeaf, UseDecl): names imported at module level
        self.globs = []  # (UseLeaf, UseDecl)
        self.scan = None

    def is_descendant_of(self, other):
        return len(self.path) > len(other.path) and self.path[:len(other.path)] == other.path

    def __repr__(self):
        return "crate::" + "::".join(self.path) if self.path else "crate"


def is_mod_rs_like(path):
    base = os.path.basename(path)
    return base in ("mod.rs", "lib.rs", "main.rs")


class Crate:
    def __init__(self, ws_root, member_dir, name, root_file, notes):
        self.ws = ws_root
        self.dir = member_dir
        self.name = name
        self.root_file = root_file  # relative to the workspace
        self.notes = notes
        self.modules = []
        self.files = {}  # relative path -> file Module
        self.skipped_test = []
        self.test_files = set()
        self.build_tree()

    def read(self, rel):
        with open(os.path.join(self.ws, rel), encoding="utf-8") as f:
            return f.read()

    def build_tree(self):
        self.root = Module((), self.root_file, None)
        queue = [self.root]
        while queue:
            mod = queue.pop(0)
            self.modules.append(mod)
            self.files[mod.file] = mod
            scan = FileScan(mod.file, lex(self.read(mod.file)))
            mod.scan = scan
            if scan.test_only:
                self.skipped_test.append(mod.file)
            if scan.unbalanced:
                self.notes.append(f"{mod.file}: brackets do not balance as read: its edges may be wrong")
            by_scope = {(): mod}
            # inline modules first (in order: an outer one precedes its inner ones)
            for name, line, scope, inline, path_attr in scan.mods:
                if inline and scope in by_scope:
                    parent = by_scope[scope]
                    child = Module(parent.path + (name,), mod.file, parent, inline=True, line=line)
                    child.scan = scan
                    parent.children[name] = child
                    by_scope[scope + (name,)] = child
                    self.modules.append(child)
            file_dir = os.path.dirname(mod.file)
            base = file_dir if is_mod_rs_like(mod.file) else os.path.join(
                file_dir, os.path.splitext(os.path.basename(mod.file))[0])

            def child_files(name, scope, path_attr=None):
                if path_attr is not None and not scope:
                    candidates = [os.path.normpath(os.path.join(file_dir, path_attr))]
                else:
                    sub = os.path.join(base, *scope)
                    candidates = [os.path.join(sub, name + ".rs"), os.path.join(sub, name, "mod.rs")]
                return candidates, [c for c in candidates if os.path.isfile(os.path.join(self.ws, c))]

            for name, line, scope, inline, path_attr in scan.mods:
                if inline or scope not in by_scope:
                    continue
                parent = by_scope[scope]
                candidates, found = child_files(name, scope, path_attr)
                if not found:
                    self.notes.append(f"{mod.file}:{line}: `mod {name};` has no file ({' or '.join(candidates)})")
                    continue
                child = Module(parent.path + (name,), found[0], parent, line=line)
                parent.children[name] = child
                queue.append(child)
            for name, line, scope in scan.test_mods:
                _, found = child_files(name, scope)
                self.test_files.update(found)
                self.skipped_test.append(f"{found[0] if found else name} (`#[cfg(test)] mod {name};` at {mod.file}:{line})")
        # module-level items and imports of each module (file or inline)
        for mod in self.modules:
            scan = mod.scan
            scope = mod.path[len(self.file_module(mod).path):]
            mod.items = set(scan.items.get(scope, ())) - set(mod.children)
            for decl in scan.uses:
                if decl.module_level and decl.scope == scope:
                    for leaf in decl.leaves:
                        if leaf.glob:
                            mod.globs.append((leaf, decl))
                        elif leaf.name:
                            mod.ns[leaf.name] = (leaf, decl)

    def file_module(self, mod):
        while mod.inline:
            mod = mod.parent
        return mod

    def scope_module(self, file_mod, scope):
        mod = file_mod
        for name in scope:
            child = mod.children.get(name)
            if child is None or not child.inline:
                break
            mod = child
        return mod

    # -- resolution
    def resolve(self, scope_mod, segs, aliases=None, seen=None):
        """(module, kind) that path `segs` written in `scope_mod` names: kind "module" when the
        path is a module, "item" when an item of it; None when outside the crate (another
        crate, a local name) or not resolvable."""
        if not segs:
            return None
        seen = set() if seen is None else seen
        first = segs[0]
        rest = segs[1:]
        if first in ("crate", "$crate"):
            cur = self.root
        elif first == "self":
            cur = scope_mod
        elif first == "super":
            cur = scope_mod.parent
            while rest and rest[0] == "super" and cur is not None:
                cur = cur.parent
                rest = rest[1:]
            if cur is None:
                return None
        elif first in scope_mod.children:
            cur = scope_mod.children[first]
        elif first in scope_mod.ns:
            got = self.resolve_import(scope_mod, first, seen)
            if got is None or got[1] != "module":
                return None  # an item imported here (its `use` is the edge), or another crate's
            cur = got[0]
        elif aliases and first in aliases:
            cur = aliases[first]
        else:
            return None  # another crate, std, a type or enum of this module, a generic...
        return self.walk(cur, rest, seen)

    def resolve_import(self, mod, name, seen):
        key = (mod.path, name)
        if key in seen:
            return None
        seen = seen | {key}
        leaf, _decl = mod.ns[name]
        return self.resolve(mod, leaf.segs, seen=seen)

    def walk(self, cur, rest, seen):
        for k, seg in enumerate(rest):
            if seg == "self":
                continue
            if seg == "super":
                if cur.parent is None:
                    return None
                cur = cur.parent
                continue
            if seg in cur.children:
                cur = cur.children[seg]
                continue
            if seg in cur.items:
                return cur, "item"
            if seg in cur.ns:
                got = self.resolve_import(cur, seg, seen)
                if got is None:
                    return None  # re-exported from another crate
                if got[1] == "module":
                    cur = got[0]
                    continue
                return got
            for leaf, _decl in cur.globs:
                key = (cur.path, "*" + leaf.text)
                if key in seen:
                    continue
                src = self.resolve(cur, leaf.segs, seen=seen | {key})
                if src and src[1] == "module":
                    m = src[0]
                    if seg in m.children or seg in m.items or seg in m.ns:
                        return self.walk(m, rest[k:], seen | {key})
            return cur, "item"  # not found: the deepest module reached
        return cur, "module"

    # -- edges
    def edges(self):
        """{(from_file, to_file): [(line, text)]}"""
        edges = defaultdict(list)

        def add(src_file, dst_mod, line, text):
            if dst_mod is None:
                return
            dst_file = dst_mod.file
            if dst_file != src_file:
                edges[(src_file, dst_file)].append((line, text))

        for fmod in [m for m in self.modules if not m.inline]:
            scan = fmod.scan
            if scan.test_only:
                continue
            aliases = {}  # module names imported by `use` anywhere in the file
            alias_decl = {}
            reexported = {}  # (scope, name) -> (target module, UseLeaf): exempt re-exports
            for decl in scan.uses:
                smod = self.scope_module(fmod, decl.scope)
                for leaf in decl.leaves:
                    got = self.resolve(smod, leaf.segs)
                    if got is None:
                        continue
                    target, kind = got
                    exempt = decl.pub and decl.module_level and target.is_descendant_of(smod)
                    text = ("pub " if decl.pub else "") + "use " + leaf.text
                    if exempt:
                        if leaf.glob:
                            for name in target.items:
                                reexported.setdefault((decl.scope, name), (target, leaf))
                        elif leaf.name:
                            reexported[(decl.scope, leaf.name)] = (target, leaf)
                        continue
                    if kind == "module" and not leaf.glob and leaf.name:
                        aliases[leaf.name] = target
                        alias_decl[leaf.name] = (target, leaf, text)
                        continue
                    add(fmod.file, target, leaf.line, text)
            used_aliases = set()
            for segs, line, scope in scan.paths:
                smod = self.scope_module(fmod, scope)
                got = self.resolve(smod, segs, aliases)
                if got is None:
                    continue
                if segs[0] in aliases and segs[0] not in smod.children and segs[0] not in (
                        "crate", "$crate", "self", "super"):
                    used_aliases.add(segs[0])
                add(fmod.file, got[0], line, "::".join(segs))
            for name, (target, leaf, text) in alias_decl.items():
                if name not in used_aliases:
                    add(fmod.file, target, leaf.line, text)
            # a re-exported name that the module's own code uses
            for name, line, scope, prev, nxt in scan.idents:
                hit = reexported.get((scope, name))
                if hit is None or prev in ("fn", "struct", "enum", "trait", "type", "union", "mod",
                                           "const", "static", "let", "mut", "'"):
                    continue
                target, leaf = hit
                if name[0].islower() and nxt not in ("(", "!", "::"):
                    continue  # a lower-case name: only a call, a macro or a path counts
                if nxt == ":" and prev in ("{", ","):
                    continue  # a field's name
                full = self.resolve(self.scope_module(fmod, scope), leaf.segs)
                add(fmod.file, full[0] if full else target, line,
                    f"{name} (re-exported at line {leaf.line}: pub use {leaf.text})")
        return edges


# --------------------------------------------------------------------------------------------
# Cycles


def sccs(nodes, adj):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        # iterative Tarjan
        work = [(v, iter(sorted(adj.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def elementary_cycles(comp, adj, limit):
    """Every elementary cycle inside one strongly connected component (a simple search from
    each node over larger nodes only, so each cycle is found once, from its smallest node)."""
    comp = sorted(comp)
    members = set(comp)
    cycles = []
    steps = 0
    for start in comp:
        allowed = {v for v in members if v >= start}
        path, on_path = [start], {start}
        its = [iter(sorted(w for w in adj.get(start, ()) if w in allowed))]
        while its:
            advanced = False
            steps += 1
            if steps > MAX_SEARCH_STEPS:
                cycles.sort(key=lambda c: (len(c), c))
                return cycles, True
            for w in its[-1]:
                if w == start:
                    cycles.append(list(path))
                    if len(cycles) >= limit:
                        cycles.sort(key=lambda c: (len(c), c))
                        return cycles, True
                elif w not in on_path:
                    path.append(w)
                    on_path.add(w)
                    its.append(iter(sorted(x for x in adj.get(w, ()) if x in allowed)))
                    advanced = True
                    break
            if not advanced:
                its.pop()
                on_path.discard(path.pop())
    cycles.sort(key=lambda c: (len(c), c))
    return cycles, False


# --------------------------------------------------------------------------------------------
# The workspace


def load_toml(path):
    with open(path, "rb") as f:
        data = f.read()
    if tomllib:
        return tomllib.loads(data.decode("utf-8"))
    text = data.decode("utf-8")
    out = {}
    section = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        m = re.fullmatch(r"\[+([^\]]+)\]+", line)
        if m:
            section = m.group(1).strip()
            out.setdefault(section, {})
            continue
        m = re.fullmatch(r"([A-Za-z0-9_-]+)\s*=\s*(.+)", line)
        if m and section:
            val = m.group(2).strip()
            if val.startswith("["):
                val = re.findall(r'"([^"]*)"', val)
            else:
                val = val.strip('"')
            out[section][m.group(1)] = val
    # nest "workspace" / "package" / "lib" as tomllib would
    return {k: v for k, v in out.items()}


def workspace_members(ws):
    manifest = load_toml(os.path.join(ws, "Cargo.toml"))
    workspace = manifest.get("workspace", {})
    members = workspace.get("members", [])
    if isinstance(members, str):
        members = [members]
    excluded = set(workspace.get("exclude", []) or [])
    dirs = []
    for pattern in members:
        for d in sorted(glob.glob(os.path.join(ws, pattern))):
            rel = os.path.relpath(d, ws)
            top = rel.split(os.sep)[0]
            if top in SKIPPED_TOP or any(fnmatch.fnmatch(rel, e) for e in excluded):
                continue
            if os.path.isfile(os.path.join(d, "Cargo.toml")) and rel not in dirs:
                dirs.append(rel)
    return dirs


def load_crate(ws, rel_dir):
    manifest = load_toml(os.path.join(ws, rel_dir, "Cargo.toml"))
    package = manifest.get("package", {}).get("name", os.path.basename(rel_dir))
    lib = manifest.get("lib", {})
    names = {package, package.replace("-", "_"), rel_dir, os.path.basename(rel_dir)}
    if lib.get("name"):
        names.add(lib["name"])
    notes = []
    root = None
    if lib.get("path"):
        root = os.path.normpath(os.path.join(rel_dir, lib["path"]))
    else:
        for cand in ("src/lib.rs", "src/main.rs"):
            if os.path.isfile(os.path.join(ws, rel_dir, cand)):
                root = os.path.join(rel_dir, cand)
                break
    if root is None:
        return None, names
    main = os.path.join(rel_dir, "src", "main.rs")
    if root != main and os.path.isfile(os.path.join(ws, main)):
        notes.append(f"{main}: a binary crate beside the library, not read")
    crate = Crate(ws, rel_dir, package, root, notes)
    src = os.path.join(ws, rel_dir, "src")
    reached = set(crate.files)
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, ws)
        if os.path.relpath(dirpath, src).split(os.sep)[0] == "bin":
            dirnames[:] = []
            continue
        for fn in sorted(filenames):
            f = os.path.join(rel, fn)
            if fn.endswith(".rs") and f not in reached and f != main:
                if f not in crate.test_files:
                    notes.append(f"{f}: not in the module tree (no `mod` declares it, or only under cfg(test))")
    return crate, names


def format_evidence(src, evidence):
    """`file:line `text`` for each line, the leaves of one `use` line folded into a group."""
    by_line = defaultdict(list)
    for line, text in evidence:
        if text not in by_line[line]:
            by_line[line].append(text)
    out = []
    for line in sorted(by_line):
        texts = by_line[line]
        folded = defaultdict(list)
        rest = []
        for text in texts:
            m = re.fullmatch(r"((?:pub )?use .*)::([A-Za-z_0-9]+)", text)
            if m:
                folded[m.group(1)].append(m.group(2))
            else:
                rest.append(text)
        parts = [f"{p}::{names[0]}" if len(names) == 1 else f"{p}::{{{', '.join(names)}}}"
                 for p, names in folded.items()] + rest
        out.append(f"{src}:{line} " + "; ".join(f"`{p}`" for p in parts))
    return ", ".join(out)


def collapse_to_folders(crate, nodes, file_edges):
    """The graph whose nodes are the crate root and its top-level modules (a folder module
    and its parent file together: `src/train/*`), for `--folders`."""
    src = os.path.join(crate.dir, "src")
    by_file = {}
    for mod in crate.modules:
        if mod.inline:
            continue
        if not mod.path:
            by_file[mod.file] = mod.file
            continue
        top = crate.root.children[mod.path[0]]
        has_folder = any(m.path[:1] == mod.path[:1] and len(m.path) > 1 and not m.inline
                         for m in crate.modules)
        by_file[mod.file] = os.path.join(src, mod.path[0], "*") if has_folder else top.file
    edges = defaultdict(list)
    for (a, b), ev in file_edges.items():
        ta, tb = by_file[a], by_file[b]
        if ta != tb:
            edges[(ta, tb)].append((a, b, ev))

    def describe(a, b):
        return "; ".join(f"{format_evidence(fa, ev)} (to {fb})" for fa, fb, ev in sorted(edges[(a, b)]))

    return sorted(set(by_file.values())), edges, describe


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crate", dest="crate", help="check one crate (package or folder name)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every edge")
    parser.add_argument("--folders", action="store_true",
                        help="coarser, for information: each top-level module of a crate is one node "
                             "(`train.rs`/`train/mod.rs` and everything under `train/` together)")
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                        help="the workspace root (default: this script's parent folder)")
    args = parser.parse_args(argv)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    ws = os.path.abspath(args.root)

    dirs = workspace_members(ws)
    checked = 0
    total_cycles = 0
    crates_with_cycles = 0
    total_nodes = total_edges = 0
    found_crate = False
    for rel_dir in dirs:
        crate, names = load_crate(ws, rel_dir)
        if args.crate and args.crate not in names:
            continue
        found_crate = True
        if crate is None:
            if args.verbose:
                print(f"{rel_dir}: no src/lib.rs or src/main.rs, skipped")
            continue
        checked += 1
        file_edges = crate.edges()
        nodes = sorted(m.file for m in crate.modules if not m.inline)
        if args.folders:
            nodes, edges, describe = collapse_to_folders(crate, nodes, file_edges)
        else:
            edges = file_edges

            def describe(a, b):
                return format_evidence(a, edges[(a, b)])
        adj = defaultdict(set)
        for (a, b) in edges:
            adj[a].add(b)
        total_nodes += len(nodes)
        total_edges += len(edges)
        if args.verbose:
            print(f"== crate {crate.name} ({crate.root_file}): {len(nodes)} modules, {len(edges)} edges")
            for note in crate.notes:
                print(f"   note: {note}")
            for skipped in crate.skipped_test:
                print(f"   test-only, not read: {skipped}")
            for (a, b) in sorted(edges):
                print(f"   {a} -> {b}: {describe(a, b)}")
        groups = []
        for comp in sccs(nodes, adj):
            if len(comp) < 2:
                continue
            found, cut = elementary_cycles(comp, adj, MAX_CYCLES_PER_SCC)
            groups.append((comp, found, cut))
        if groups:
            count = sum(len(found) for _, found, _ in groups)
            crates_with_cycles += 1
            total_cycles += count
            unit = "top-level modules" if args.folders else "files"
            print(f"crate {crate.name}: {count} cycle(s) in {len(groups)} group(s) of {unit} that use each other")
            number = 0
            for g, (comp, found, cut) in enumerate(groups, 1):
                print(f"  group {g} ({len(comp)} {'modules' if args.folders else 'files'}): {', '.join(comp)}")
                for cycle in found:
                    number += 1
                    print(f"    cycle {number}: " + " -> ".join(cycle + [cycle[0]]))
                if cut:
                    print(f"    (more than {MAX_CYCLES_PER_SCC} cycles: the first ones shown)")
                print("    the edges inside the group (each cycle breaks where one of its edges goes):")
                inside = set(comp)
                for (a, b) in sorted(edges):
                    if a in inside and b in inside:
                        print(f"      {a} -> {b}: {describe(a, b)}")
    if args.crate and not found_crate:
        print(f"no workspace member named {args.crate!r}", file=sys.stderr)
        return 2
    if total_cycles:
        print(f"module cycles: {total_cycles} cycle(s) in {crates_with_cycles} of {checked} crate(s)")
        return 1
    what = "top-level modules" if args.folders else "module files"
    print(f"module cycles: none ({checked} crate(s), {total_nodes} {what}, {total_edges} edges)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
