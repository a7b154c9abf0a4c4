import unittest

from pricing import line_total, order_total


class PricingTest(unittest.TestCase):
    def test_line_total(self) -> None:
        self.assertEqual(line_total(250, 4), 1000)

    def test_order_total_without_discount(self) -> None:
        self.assertEqual(order_total([(250, 4), (99, 1)]), 1099)

    def test_order_total_with_discount(self) -> None:
        self.assertEqual(order_total([(1000, 2)], discount_percent=10), 1800)


if __name__ == "__main__":
    unittest.main()
