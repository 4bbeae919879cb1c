"""The README's Python examples run as written, in order, in one namespace."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _check_results(namespace: dict, out: str) -> None:
    assert namespace["res"].objective >= namespace["res"].lower_bound
    assert namespace["sim"].answers.shape == (10_000, 2080)
    assert "lower bound" in out


@pytest.mark.slow  # ~45 s; the paste test below runs the same blocks in one namespace and checks the same results
def test_readme_python_blocks_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own README
    _check_results(namespace, capsys.readouterr().out)


def test_readme_python_blocks_paste_into_the_interactive_prompt(capsys):
    """Pasted line by line into `python` (a blank line ends a block there), every snippet runs, in order and in
    one namespace, with the results the README shows."""
    import code

    class Console(code.InteractiveConsole):
        errors: list = []

        def showsyntaxerror(self, filename=None, **kwargs):
            self.errors.append("SyntaxError")

        def showtraceback(self):
            import sys
            self.errors.append(repr(sys.exc_info()[1]))

    console = Console()
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    for block in blocks:
        for line in block.splitlines():
            console.push(line)
        console.push("")  # the prompt's Enter after a paste
    assert console.errors == []
    _check_results(console.locals, capsys.readouterr().out)


def test_install_hints_work_from_a_source_checkout():
    """`pip install 'mmopt[extra]'` needs mmopt on PyPI; from a checkout it is `pip install -e '.[extra]'`."""
    for path in [README, *(README.parent / "mmopt").glob("*.py")]:
        assert "install 'mmopt[" not in path.read_text(), path
