import copy
import sys
import unittest

sys.path.insert(0, "/app")
from inventory.stock import restock  # noqa: E402


class RestockTest(unittest.TestCase):
    def setUp(self):
        self.items = [{"name": "bolt", "qty": 3}, {"name": "nut", "qty": 5}, {"name": "gear", "qty": 9}]

    def test_restocks_at_and_below_threshold(self):
        new, names = restock(self.items, 5, 10)
        self.assertEqual(names, ["bolt", "nut"])
        self.assertEqual([i["qty"] for i in new], [13, 15, 9])

    def test_leaves_the_argument_unchanged(self):
        before = copy.deepcopy(self.items)
        new, _ = restock(self.items, 5, 10)
        self.assertEqual(self.items, before)
        for a, b in zip(new, self.items):
            self.assertIsNot(a, b)

    def test_empty(self):
        self.assertEqual(restock([], 1, 1), ([], []))


if __name__ == "__main__":
    unittest.main()
