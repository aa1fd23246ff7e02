"""The house's size check (tests/house.py) catches each room too big, and counts only what it says it counts."""

import os
import tempfile
import unittest

import house


def body(lines):
    return "\n".join(f"    let x{i} = {i};" for i in range(lines))


class Functions(unittest.TestCase):
    def test_a_function_over_the_limit_is_named_with_its_line_and_length(self):
        text = "//! a module\n\nfn short() {}\n\npub(crate) fn long(a: u8) -> u8 {\n" + body(100) + "\n    a\n}\n"
        self.assertEqual(house.long_functions(text), [("long", 5, 103)])

    def test_a_function_at_the_limit_passes(self):
        text = "fn fits() {\n" + body(98) + "\n}\n"
        self.assertEqual(house.long_functions(text), [])

    def test_tests_are_not_counted(self):
        text = (
            "#[cfg(test)]\nmod tests {\n    fn helper() {\n" + body(120) + "\n    }\n}\n"
            "#[test]\nfn alone() {\n" + body(120) + "\n}\n"
            "#[tokio::test(flavor = \"multi_thread\")]\nasync fn spawned() {\n" + body(120) + "\n}\n"
        )
        self.assertEqual(house.long_functions(text), [])

    def test_braces_in_strings_chars_and_comments_do_not_end_a_function(self):
        text = (
            "fn tricky<'a>(s: &'a str) -> &'a str {\n"
            '    let _ = "}}}";\n'
            "    let _ = '}';\n"
            '    let _ = r#"} "quoted" }"#;\n'
            "    // }\n"
            "    /* } /* nested } */ } */\n"
            + body(100)
            + "\n    s\n}\n"
        )
        self.assertEqual([name for name, _, _ in house.long_functions(text)], ["tricky"])

    def test_a_trait_method_without_a_body_is_not_a_function_to_measure(self):
        text = "trait T {\n    fn declared(&self);\n}\nfn next() {\n" + body(10) + "\n}\n"
        self.assertEqual(house.long_functions(text), [])


class Prose(unittest.TestCase):
    def test_a_long_paragraph_list_item_and_cell_are_each_caught(self):
        long = "word " * 200
        text = f"# Title\n\n{long}\n\n- {long}\n  - short\n\n| a | b |\n|---|---|\n| {long} | x |\n"
        kinds = [(kind, line) for line, kind, _ in house.long_prose(text)]
        self.assertEqual(kinds, [("paragraph", 3), ("list item", 5), ("table cell", 10)])

    def test_comments_link_targets_and_code_are_not_read(self):
        text = (
            "A figure $2.08<!-- bill " + "x" * 900 + " --> and [a link](" + "y" * 900 + ").\n\n"
            "```sh\n" + "z " * 900 + "\n```\n"
        )
        self.assertEqual(house.long_prose(text), [])

    def test_a_nested_item_is_counted_apart_from_its_parent(self):
        half = "word " * 100
        text = f"- {half}\n  - {half}\n  - {half}\n"
        self.assertEqual(house.long_prose(text), [])


class Files(unittest.TestCase):
    def test_a_long_source_file_fails_and_tests_and_benches_do_not(self):
        root = tempfile.mkdtemp(prefix="apiary-house-test-")
        for rel, lines in {"a/src/big.rs": 801, "a/src/ok.rs": 800, "a/tests/big.rs": 2000, "a/benches/b.rs": 2000}.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write("// line\n" * lines)
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("# A\n\nShort.\n")
        problems = house.check(root)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("a/src/big.rs: 801 lines", problems[0])


if __name__ == "__main__":
    unittest.main()
