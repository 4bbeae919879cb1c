"""Shared by the number-theoretic transforms' tests: is g a primitive root modulo the prime p?"""


def is_primitive_root(g: int, p: int) -> bool:
    """g^(p−1) = 1 and g^((p−1)/f) ≠ 1 mod p for every prime factor f of p − 1 (trial division: p < 2³²): g has
    order p − 1, so p is prime too (Lucas's test), and g a primitive root."""
    factors, m, q = set(), p - 1, 2
    while q * q <= m:
        while m % q == 0:
            factors.add(q)
            m //= q
        q += 1
    factors |= {m} - {1}
    return pow(g, p - 1, p) == 1 and all(pow(g, (p - 1) // f, p) != 1 for f in factors)
