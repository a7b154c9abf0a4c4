"""Order pricing for a small shop."""


def line_total(unit_price_cents: int, quantity: int) -> int:
    """Price of one order line, in cents."""
    return unit_price_cents * quantity


def order_total(lines: list[tuple[int, int]], discount_percent: int = 0) -> int:
    """Total of an order in cents, after a percentage discount, rounded down to the cent."""
    subtotal = sum(line_total(price, qty) for price, qty in lines)
    discount = subtotal * discount_percent // 100
    return subtotal + discount
