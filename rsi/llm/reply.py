"""Reply handling: exactly one fenced code block, a module defining ``launch``, its tunables declared in ``TUNABLE``.

Everything here reads the reply as text and as an AST; nothing in it is imported or executed in the search process.
Whether the code honours the contract is not decided here: the harness's static checks and the isolated worker
judge it like any other candidate. A reply that fails these format rules is a rejected candidate whose reason goes
back into the next prompt.

The tunables format (the static checker admits only immutable module-level constants, hence tuples)::

    TUNABLE = (("BLOCK_F", (512, 1024, 2048)), ("num_warps", (4, 8)))

    def launch(x, BLOCK_F=1024, num_warps=4): ...

Each name is a keyword parameter of ``launch`` with a literal default that is one of its values. The candidate's
config is the defaults; the hybrid search then tunes the declared values with the offline optimizer.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rsi.contract import ENTRY_POINT

TUNABLE_NAME = "TUNABLE"
MAX_TUNABLES = 6
MAX_VALUES = 8
PYTHON_TAGS = ("", "python", "py", "python3")
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)
_OPENING = re.compile(r"^[ \t]*```", re.MULTILINE)

Tunable = tuple[tuple[str, tuple[Any, ...]], ...]


@dataclass(frozen=True)
class ParsedReply:
    ok: bool
    reason: str = ""
    source: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    tunable: Tunable = ()

    def combinations(self) -> int:
        n = 1
        for _, values in self.tunable:
            n *= len(values)
        return n


class _Bad(Exception):
    pass


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of every closed fenced block."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def parse_reply(text: str, input_names: Sequence[str]) -> ParsedReply:
    try:
        source = _one_block(text)
        tree = _parse(source)
        launch = _entry(tree, input_names)
        tunable = _tunable(tree)
        config = _defaults(launch, tunable)
    except _Bad as e:
        return ParsedReply(False, str(e))
    return ParsedReply(True, "", source, config, tunable)


def _one_block(text: str) -> str:
    blocks = code_blocks(text)
    if not blocks:
        opened = len(_OPENING.findall(text))
        hint = (" (a fence was opened but never closed: was the reply cut off at the token limit?)" if opened % 2
                else "")
        raise _Bad("the reply has no fenced code block; send the whole module in exactly one ```python block" + hint)
    if len(blocks) > 1:
        raise _Bad(f"the reply has {len(blocks)} code blocks; send exactly one (the whole module) and no others")
    lang, body = blocks[0]
    if lang not in PYTHON_TAGS:
        raise _Bad(f"the code block is tagged {lang!r}; it must be a Python module (```python)")
    if not body.strip():
        raise _Bad("the code block is empty")
    return body if body.endswith("\n") else body + "\n"


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as e:
        line = (e.text or "").strip()
        raise _Bad(f"syntax error at line {e.lineno}: {e.msg}" + (f" ({line[:120]})" if line else "")) from None


def _entry(tree: ast.Module, input_names: Sequence[str]) -> ast.FunctionDef:
    found = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == ENTRY_POINT]
    if not found:
        raise _Bad(f"the module defines no top-level `def {ENTRY_POINT}(...)` (the entry point the harness calls)")
    fn = found[-1]
    a = fn.args
    positional = a.posonlyargs + a.args
    required = len(positional) - len(a.defaults)
    if a.vararg is None and required != len(input_names):
        raise _Bad(f"`{ENTRY_POINT}` takes {required} required positional argument(s) but is called with the op "
                   f"group's {len(input_names)} input(s) ({', '.join(input_names)}); tunables need defaults")
    return fn


def _literal(node: ast.AST, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Bad(f"{what} must be a literal constant") from None


def _tunable(tree: ast.Module) -> Tunable:
    nodes = [s for s in tree.body if isinstance(s, ast.Assign) and len(s.targets) == 1
             and isinstance(s.targets[0], ast.Name) and s.targets[0].id == TUNABLE_NAME]
    if not nodes:
        return ()
    value = _literal(nodes[-1].value, TUNABLE_NAME)
    shape_hint = f'{TUNABLE_NAME} must be a tuple of ("NAME", (value, ...)) pairs (tuples, not lists or dicts)'
    if not isinstance(value, tuple) or not value:
        raise _Bad(shape_hint)
    out, seen = [], set()
    for item in value:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], tuple)
                and item[1]):
            raise _Bad(shape_hint)
        name, values = item
        if name in seen:
            raise _Bad(f"{TUNABLE_NAME} declares {name!r} twice")
        seen.add(name)
        if not all(isinstance(v, (int, float, bool, str)) for v in values):
            raise _Bad(f"{TUNABLE_NAME} values of {name!r} must be int, float, bool or str constants")
        if len(set(values)) != len(values):
            raise _Bad(f"{TUNABLE_NAME} lists a value of {name!r} twice")
        if len(values) > MAX_VALUES:
            raise _Bad(f"{TUNABLE_NAME} gives {name!r} {len(values)} values; at most {MAX_VALUES}")
        out.append((name, values))
    if len(out) > MAX_TUNABLES:
        raise _Bad(f"{TUNABLE_NAME} declares {len(out)} parameters; at most {MAX_TUNABLES}")
    return tuple(out)


def _defaults(fn: ast.FunctionDef, tunable: Tunable) -> dict[str, Any]:
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults: dict[str, ast.AST] = dict(zip([p.arg for p in positional[len(positional) - len(a.defaults):]],
                                            a.defaults))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    config = {}
    for name, values in tunable:
        if name not in defaults:
            raise _Bad(f"{TUNABLE_NAME} names {name!r}, which is not a keyword parameter of `{ENTRY_POINT}` with a "
                       f"default")
        default = _literal(defaults[name], f"the default of {name!r}")
        if default not in values or type(default) is not type(values[values.index(default)]):
            raise _Bad(f"the default {name}={default!r} is not one of its declared values {values!r}")
        config[name] = default
    return config
