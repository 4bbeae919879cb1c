"""mmopt._base.hints: the names a newcomer reads (products of sums, parenthesised)."""


def test_a_factor_that_is_a_sum_is_parenthesised_in_a_product_name():
    """kron(stack([prefix(2), 2·total(2)]), identity(3)) was named prefix(2)+2*total(2)⊗identity(3), which reads as
    prefix(2) + 2·(total(2)⊗identity(3)) in an answers table's table column (a newcomer's audit)."""
    from mmopt import strategy as st
    from mmopt import workload as wl
    summed = wl.stack([wl.prefix(2), wl.total(2)], weights=[1, 2])
    assert wl.kron(summed, wl.identity(3)).name == "(prefix(2)+2*total(2))⊗identity(3)"
    assert wl.kron(wl.identity(3), summed).name == "identity(3)⊗(prefix(2)+2*total(2))"
    assert wl.kron(wl.prefix(4), wl.identity(3), wl.total(2)).name == "prefix(4)⊗identity(3)⊗total(2)"
    assert wl.kron(wl.marginals((2, 2), 1), wl.identity(2)).name.startswith("marginals(")  # no sum: as it was
    assert st.kron(st.identity(2), st.stack([st.identity(2), st.hierarchical(2)])).name == "identity⊗(identity+H2)"


def test_only_a_sum_at_the_top_level_is_parenthesised():
    """A '+' inside a factor's own brackets is no sum of factors: f(a+b), g[c+d] and an already bracketed product
    stay as they are (wrapping them would read as a sum that is not there); a sum after them is still wrapped."""
    from mmopt._base.hints import factor_names
    assert factor_names(["f(a+b)", "g[c+d]", "(a+b)⊗c"]) == "f(a+b)⊗g[c+d]⊗(a+b)⊗c"
    assert factor_names(["g[c+d]+e", "f(a)"]) == "(g[c+d]+e)⊗f(a)"
