"""Strategies from the literature that are built, not searched: hierarchical ones (HB, GreedyH, quad-tree;
:mod:`.hierarchies`) and transforms (Privelet-nD wavelets, the Fourier basis; :mod:`.transforms`).

They are re-exported by :mod:`mmopt.strategy` (``strategy.hb``, ``strategy.privelet``, ...).
"""
