"""Unit tests of the FalkorDB index repair (`falkordb_index.py`): which
labels are repaired, the statement that repairs one, and that no other
backend is touched. The driver and its session are stand-ins.

Run: `python3 -m unittest discover -s crates/cgc-fresh/driver/tests`."""

import unittest

from driver_module import load

index = load("falkordb_index.py", "cgc_fresh_falkordb_index")
BROKEN = index.BROKEN_ATTRIBUTE


class StandInDriver:
    def __init__(self, rows):
        self.rows = rows
        self.ran = []

    def session(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        return False

    def run(self, query):
        self.ran.append(query)
        return list(self.rows) if query.startswith("CALL db.indexes()") else []


class LabelsTest(unittest.TestCase):
    def test_node_labels_whose_index_holds_the_attribute_sorted_once_each(self):
        rows = [
            {"label": "Function", "properties": ["name", "path", "line_number", BROKEN], "entitytype": "NODE"},
            {"label": "Class", "properties": ("name", BROKEN), "entitytype": "NODE"},
            {"label": "Class", "properties": [BROKEN], "entitytype": "NODE"},
            # Rows as lists, without the entity type column.
            ["Variable", ["name", BROKEN]],
            {"label": "File", "properties": ["path"], "entitytype": "NODE"},
            {"label": "CALLS", "properties": [BROKEN], "entitytype": "RELATIONSHIP"},
            {"label": None, "properties": [BROKEN]},
            {"label": "Odd", "properties": BROKEN},
        ]
        self.assertEqual(index.labels_to_repair(rows), ["Class", "Function", "Variable"])

    def test_the_drop_statement_names_the_label_quoted_and_refuses_a_backtick(self):
        self.assertEqual(index.drop_statement("Function"), f"DROP INDEX FOR (n:`Function`) ON (n.{BROKEN})")
        with self.assertRaises(ValueError):
            index.drop_statement("Bad`) DETACH DELETE (n")


class RepairTest(unittest.TestCase):
    ROWS = [{"label": "Function", "properties": ["name", BROKEN], "entitytype": "NODE"},
            {"label": "Class", "properties": ["name", BROKEN], "entitytype": "NODE"}]

    def test_on_falkordb_each_broken_index_loses_the_attribute(self):
        for backend in index.FALKORDB_BACKENDS:
            driver = StandInDriver(self.ROWS)
            self.assertEqual(index.repair(driver, backend), ["Class", "Function"])
            self.assertEqual(driver.ran[1:], [index.drop_statement("Class"), index.drop_statement("Function")])

    def test_nothing_to_repair_drops_nothing(self):
        driver = StandInDriver([])
        self.assertEqual(index.repair(driver, "falkordb"), [])
        self.assertEqual(len(driver.ran), 1)

    def test_any_other_backend_is_not_even_asked(self):
        for backend in ("kuzudb", "ladybugdb", "neo4j", None):
            driver = StandInDriver(self.ROWS)
            self.assertEqual(index.repair(driver, backend), [])
            self.assertEqual(driver.ran, [])


if __name__ == "__main__":
    unittest.main()
