#!/usr/bin/env python3
"""Tests of scripts/check-module-cycles.py on tiny fake workspaces in a temporary folder.

Run: python3 scripts/test_check_module_cycles.py
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "check-module-cycles.py")

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
_spec = importlib.util.spec_from_file_location("check_module_cycles", SCRIPT)
checker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checker)


def write_workspace(root, crates, extra_members=()):
    """`crates`: {crate folder: {path under the crate: source}}."""
    members = list(crates) + list(extra_members)
    with open(os.path.join(root, "Cargo.toml"), "w") as f:
        f.write("[workspace]\nmembers = [" + ", ".join(f'"{m}"' for m in members) + ']\nexclude = ["vendor"]\n')
    for crate, files in crates.items():
        os.makedirs(os.path.join(root, crate), exist_ok=True)
        with open(os.path.join(root, crate, "Cargo.toml"), "w") as f:
            f.write(f'[package]\nname = "{crate}"\nversion = "0.1.0"\n')
        for rel, text in files.items():
            path = os.path.join(root, crate, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(textwrap.dedent(text))


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def run_checker(self, *args):
        proc = subprocess.run([sys.executable, SCRIPT, "--root", self.root, *args],
                              capture_output=True, text=True)
        return proc.returncode, proc.stdout + proc.stderr

    def edges(self, crate_dir):
        crate, _names = checker.load_crate(self.root, crate_dir)
        return {(a, b): ev for (a, b), ev in crate.edges().items()}

    # -- cycles that must be found

    def test_cycle_through_use_crate(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": "use crate::b::B;\npub struct A(B);\n",
            "src/b.rs": "pub struct B;\npub fn f() { let _ = crate::a::A(B); }\n",
        }})
        rc, out = self.run_checker()
        self.assertEqual(rc, 1, out)
        self.assertIn("c/src/a.rs -> c/src/b.rs -> c/src/a.rs", out)
        self.assertIn("c/src/a.rs:1 `use crate::b::B`", out)
        self.assertIn("c/src/b.rs:2 `crate::a::A`", out)

    def test_cycle_through_super(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod m;\n",
            # the parent uses its child's function in its own code; the child uses the parent's
            "src/m/mod.rs": "mod x;\npub struct Thing;\npub fn run() { x::helper(); }\n",
            "src/m/x.rs": "use super::Thing;\npub fn helper() -> Thing { Thing }\n",
        }})
        rc, out = self.run_checker()
        self.assertEqual(rc, 1, out)
        self.assertIn("c/src/m/mod.rs -> c/src/m/x.rs -> c/src/m/mod.rs", out)
        self.assertIn("c/src/m/x.rs:1 `use super::Thing`", out)
        self.assertIn("c/src/m/mod.rs:3 `x::helper`", out)

    def test_cycle_between_siblings_through_super_paths(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod m;\n",
            "src/m.rs": "mod x;\nmod y;\n",  # a parent file beside its folder
            "src/m/x.rs": "use super::y::Y;\npub fn f(_: Y) {}\n",
            "src/m/y.rs": "pub struct Y;\nfn g() { super::x::f(Y) }\n",
        }})
        rc, out = self.run_checker()
        self.assertEqual(rc, 1, out)
        self.assertIn("c/src/m/x.rs -> c/src/m/y.rs -> c/src/m/x.rs", out)
        self.assertNotIn("c/src/m.rs ->", out)

    def test_grouped_multiline_use(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": "pub struct A;\nuse crate::{\n    b::{\n        c::C,\n        B,\n    },\n};\n",
            "src/b.rs": "mod c;\npub struct B;\n",
            "src/b/c.rs": "pub struct C(crate::a::A);\n",
        }})
        rc, out = self.run_checker()
        self.assertEqual(rc, 1, out)
        self.assertIn("c/src/a.rs -> c/src/b/c.rs -> c/src/a.rs", out)
        edges = self.edges("c")
        self.assertEqual([line for line, _ in edges[("c/src/a.rs", "c/src/b/c.rs")]], [4])
        self.assertEqual([line for line, _ in edges[("c/src/a.rs", "c/src/b.rs")]], [5])

    def test_root_using_a_childs_item_in_its_code_is_a_cycle(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod a;\npub use a::helper;\npub struct Root;\npub fn go() { helper(); }\n",
            "src/a.rs": "use crate::Root;\npub fn helper() -> Root { Root }\n",
        }})
        rc, out = self.run_checker()
        self.assertEqual(rc, 1, out)
        self.assertIn("c/src/a.rs -> c/src/lib.rs -> c/src/a.rs", out)
        self.assertIn("c/src/lib.rs:4 `helper (re-exported at line 2", out)

    # -- what must not make an edge

    def test_reexport_is_not_an_edge(self):
        write_workspace(self.root, {"c": {
            # lib.rs re-exports its children's items; a child uses an item lib.rs defines
            "src/lib.rs": "mod a;\nmod b;\npub use a::A;\npub use b::*;\npub struct Root;\n",
            "src/a.rs": "use crate::Root;\npub struct A(Root);\n",
            "src/b.rs": "pub struct B(pub crate::Root);\n",
        }})
        rc, out = self.run_checker()
        self.assertEqual(rc, 0, out)
        self.assertIn("module cycles: none", out)

    def test_reexported_name_resolves_to_its_defining_file(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod a;\nmod b;\nmod k;\npub use a::A;\n",
            "src/a.rs": "pub struct A;\n",
            "src/b.rs": "use crate::A;\nfn f() { let _ = crate::k::conv(); }\n",
            "src/k/mod.rs": "mod conv;\npub use conv::conv;\n",
            "src/k/conv.rs": "pub fn conv() {}\n",
        }})
        edges = self.edges("c")
        self.assertIn(("c/src/b.rs", "c/src/a.rs"), edges)
        self.assertIn(("c/src/b.rs", "c/src/k/conv.rs"), edges)
        self.assertNotIn(("c/src/b.rs", "c/src/lib.rs"), edges)
        self.assertNotIn(("c/src/b.rs", "c/src/k/mod.rs"), edges)

    def test_cfg_test_blocks_are_ignored(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod a;\nmod b;\n#[cfg(test)]\nmod helpers;\n",
            "src/a.rs": textwrap.dedent("""\
                pub struct A;
                #[cfg(test)]
                use crate::b::B;
                #[cfg(test)]
                #[allow(dead_code)]
                fn helper() { crate::b::f() }
                #[cfg(test)]
                mod tests {
                    use crate::b::B;
                    #[test]
                    fn t() { let _ = B; crate::b::f(); }
                }
            """),
            "src/b.rs": "pub struct B(pub crate::a::A);\npub fn f() {}\n",
            "src/helpers.rs": "use crate::a::A;\nuse crate::b::B;\n",
        }})
        rc, out = self.run_checker()
        self.assertEqual(rc, 0, out)
        edges = self.edges("c")
        self.assertEqual(set(edges), {("c/src/b.rs", "c/src/a.rs")})

    def test_comments_and_strings_are_ignored(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": textwrap.dedent("""\
                //! See [`crate::b::B`].
                // use crate::b::B;
                /* crate::b::f(); /* nested */ use crate::b::B; */
                /// Like [`crate::b::B`] and `super::b::f`.
                pub struct A;
                pub const S: &str = "crate::b::f()";
                pub const R: &str = r#"use crate::b::B; "quoted""#;
                pub const C: char = '"';
                pub fn f<'a>(x: &'a str) -> &'a str { x }
            """),
            "src/b.rs": "use crate::a::A;\npub struct B(A);\npub fn f() {}\n",
        }})
        rc, out = self.run_checker()
        self.assertEqual(rc, 0, out)
        self.assertEqual(set(self.edges("c")), {("c/src/b.rs", "c/src/a.rs")})

    def test_module_alias_resolves_through_its_uses(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod k;\nmod user;\n",
            "src/k/mod.rs": "mod conv;\nmod graph;\npub use conv::run;\n",
            "src/k/conv.rs": "pub fn run() {}\n",
            "src/k/graph.rs": "pub fn plan() {}\n",
            "src/user.rs": "use crate::k;\nuse crate::k::graph as g;\nfn f() { k::run(); g::plan(); }\n",
        }})
        # k/graph is private to k: resolution still follows the path
        edges = self.edges("c")
        self.assertEqual(set(edges), {("c/src/user.rs", "c/src/k/conv.rs"), ("c/src/user.rs", "c/src/k/graph.rs")})
        self.assertEqual(edges[("c/src/user.rs", "c/src/k/conv.rs")], [(3, "k::run")])

    def test_inline_modules_super_and_self(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": textwrap.dedent("""\
                pub struct A;
                mod inner {
                    use super::A;          // a.rs itself: no edge
                    use super::super::b::B; // b.rs
                    pub fn f(_: A, _: B) {}
                }
            """),
            "src/b.rs": "pub struct B;\n",
        }})
        self.assertEqual(set(self.edges("c")), {("c/src/a.rs", "c/src/b.rs")})

    # -- the workspace and the options

    def test_workspace_members_crate_option_and_skipped_folders(self):
        cyclic = {
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": "use crate::b::B;\npub struct A;\n",
            "src/b.rs": "use crate::a::A;\npub struct B;\n",
        }
        clean = {
            "src/lib.rs": "mod a;\n",
            "src/a.rs": "pub struct A;\n",
            # binaries are other crates: not read
            "src/bin/tool/main.rs": "mod x;\n",
            "src/bin/tool/x.rs": "use crate::y::Y;\n",
        }
        write_workspace(self.root, {"bad": cyclic, "good": clean})
        # a vendored copy with a cycle, outside the members (and excluded)
        os.makedirs(os.path.join(self.root, "vendor", "dep", "src"))
        for rel, text in cyclic.items():
            with open(os.path.join(self.root, "vendor", "dep", rel), "w") as f:
                f.write(text)
        rc, out = self.run_checker()
        self.assertEqual(rc, 1, out)
        self.assertIn("crate bad:", out)
        self.assertNotIn("vendor", out)
        self.assertIn("1 of 2 crate(s)", out)
        rc, out = self.run_checker("--crate", "good")
        self.assertEqual(rc, 0, out)
        self.assertIn("module cycles: none (1 crate(s), 2 module files", out)
        rc, out = self.run_checker("--crate", "good", "--verbose")
        self.assertEqual(rc, 0, out)
        self.assertIn("== crate good", out)
        rc, out = self.run_checker("--crate", "nope")
        self.assertEqual(rc, 2, out)

    def test_verbose_prints_edges(self):
        write_workspace(self.root, {"c": {
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": "pub struct A;\n",
            "src/b.rs": "use crate::a::A;\n",
        }})
        rc, out = self.run_checker("--verbose")
        self.assertEqual(rc, 0, out)
        self.assertIn("c/src/b.rs -> c/src/a.rs: c/src/b.rs:1 `use crate::a::A`", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
