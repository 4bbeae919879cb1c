"""Brute force for the participation tests: every pattern of a minimum-separation schema, listed."""


def all_patterns(n, b, k):
    """Every pattern of at most k steps, b apart, the empty one included (built step by step)."""
    out, grow = [()], [()]
    for _ in range(k):
        grow = [p + (t,) for p in grow for t in range(p[-1] + b if p else 0, n)]
        out += grow
    return out
