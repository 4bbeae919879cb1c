"""Reproductions of the paper's tables and figures; each module is run() + plot() + main(argv)."""
