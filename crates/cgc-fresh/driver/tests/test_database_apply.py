"""Unit tests of the rules of the database phase that need no database
(`database_apply.py`, `kuzu_reader.py`).

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import unittest

from driver_module import companion

database_apply = companion("database_apply")
kuzu_reader = companion("kuzu_reader")


class SmallRulesTest(unittest.TestCase):
    def test_the_metadata_row_is_the_last_on_falkordb_the_first_elsewhere(self):
        self.assertEqual(database_apply.module_metadata_row("falkordb"), "last_row")
        self.assertEqual(database_apply.module_metadata_row("falkordb-remote"), "last_row")
        self.assertEqual(database_apply.module_metadata_row("kuzudb"), "first_row")

    def test_binder_errors_are_told_from_others(self):
        for text in ("Binder exception: Cannot find property x", "Cannot find a valid label", "Table X does not exist"):
            self.assertTrue(kuzu_reader.is_binder_error(RuntimeError(text)), text)
        self.assertFalse(kuzu_reader.is_binder_error(RuntimeError("Connection refused")))
        self.assertTrue(kuzu_reader.is_cgc_binder_error(RuntimeError("Cannot find a valid label")))
        self.assertFalse(kuzu_reader.is_cgc_binder_error(RuntimeError("Table X does not exist")))


if __name__ == "__main__":
    unittest.main()
