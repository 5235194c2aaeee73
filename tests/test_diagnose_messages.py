"""posenc_lib.tools.diagnose.messages: MESSAGES[code] and the codes the package returns.

The codes are read from the package's source (ast), not restated here: a string
constant is a returned code where the source puts it into a finding (the first
argument of ``Diagnosis(...)`` or ``_Fit(...)``, ``findings``/``codes``
``.append(...)`` or ``+ [...]``, the code of a ``return ("code", sentence)``,
the key of a known variant in ``out["code"] = ...`` or ``{"code": ...}``).
Each test is checked against planted bugs in ``test_planted_bugs_are_caught``.
"""

import ast
import string
from pathlib import Path

from posenc_lib.tools import diagnose
from posenc_lib.tools.diagnose.messages import MESSAGES

PACKAGE = Path(diagnose.__file__).parent
FINDING_LISTS = ("findings", "codes")


def _strings(node):
    """String constants of a list/tuple literal (or a lone constant)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _name(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_sentence(node) -> bool:
    """The second element of ``return ("code", sentence)``: text, not a number."""
    return (isinstance(node, (ast.JoinedStr, ast.BinOp))
            or (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and node.value != "")
            or _name(node) == "line")


def emitted_codes(sources: dict) -> dict:
    """``{code: [file:line, ...]}`` for every code the source returns."""
    found = {}

    def add(values, where):
        for v in values:
            found.setdefault(v, []).append(where)

    for file, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            where = f"{file}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                callee = _name(node.func)
                if callee in ("Diagnosis", "_Fit") and node.args:
                    add(_strings(node.args[0]), where)
                if (callee == "append" and node.args
                        and _name(node.func.value) in FINDING_LISTS):
                    add(_strings(node.args[0]), where)
                    # candidates.append((["code"], lines, theta))
                if (callee == "append" and node.args
                        and isinstance(node.args[0], ast.Tuple)):
                    first = node.args[0].elts[0] if node.args[0].elts else None
                    if isinstance(first, ast.List):
                        add(_strings(first), where)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                # findings + ["code"], [c for c in findings ...] + ["code"]
                for a, b in ((node.left, node.right), (node.right, node.left)):
                    if (_name(a) in FINDING_LISTS or isinstance(a, ast.ListComp)) \
                            and isinstance(b, ast.List):
                        add(_strings(b), where)
            elif (isinstance(node, ast.AugAssign)
                  and _name(node.target) in FINDING_LISTS
                  and isinstance(node.value, ast.List)):
                add(_strings(node.value), where)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    listed = isinstance(node.value, ast.List)
                    if _name(target) in FINDING_LISTS and listed:
                        add(_strings(node.value), where)
                    if (isinstance(target, ast.Subscript)
                            and _name(target.value) == "out"
                            and isinstance(target.slice, ast.Constant)):
                        add([target.slice.value], where)
                    if _name(target) == "out" and isinstance(node.value, ast.Dict):
                        add([k.value for k in node.value.keys
                             if isinstance(k, ast.Constant)], where)
            elif (isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple)
                  and len(node.value.elts) >= 2 and _is_sentence(node.value.elts[1])):
                add(_strings(node.value.elts[0]), where)
    return found


def message_uses(sources: dict) -> list:
    """``(where, code or None, keywords or None)`` for every ``MESSAGES[...]``:
    the literal code (None for a variable key) and the keywords of the
    ``.format(...)`` it feeds (None when it is not formatted)."""
    uses = []
    for file, text in sources.items():
        tree = ast.parse(text)
        formatted = {}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "format"):
                formatted[id(node.func.value)] = {k.arg for k in node.keywords}
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and _name(node.value) == "MESSAGES":
                key = node.slice.value if isinstance(node.slice, ast.Constant) else None
                uses.append((f"{file}:{node.lineno}", key, formatted.get(id(node))))
    return uses


def _sources(replace=None) -> dict:
    sources = {p.name: p.read_text() for p in sorted(PACKAGE.glob("*.py"))
               if p.name != "messages.py"}
    for file, (old, new) in (replace or {}).items():
        assert sources[file].count(old) == 1, (file, old)
        sources[file] = sources[file].replace(old, new)
    return sources


def problems(sources: dict, messages: dict) -> list:
    """Everything wrong between the codes the source returns and ``messages``."""
    out = []
    codes = emitted_codes(sources)
    for code, where in sorted(codes.items()):
        if code not in messages:
            out.append(f"{code!r} returned at {where[0]} has no message")
    for code in messages:
        if code not in codes:
            out.append(f"message {code!r}: no code in the package returns it")
    fields = {code: {f for _, f, _, _ in string.Formatter().parse(text)
                     if f is not None}
              for code, text in messages.items()}
    used = set()
    for where, code, keywords in message_uses(sources):
        if code is None:
            if keywords is None:
                raw = sorted(c for c, f in fields.items() if f)
                if raw:
                    out.append(f"{where}: MESSAGES[...] with a variable key prints the "
                               f"placeholders of {raw} unfilled")
            continue
        used.add(code)
        if code not in messages:
            out.append(f"{where}: MESSAGES[{code!r}] has no entry")
        elif fields[code] and (keywords is None or not fields[code] <= keywords):
            out.append(f"{where}: MESSAGES[{code!r}] leaves "
                       f"{sorted(fields[code] - (keywords or set()))} unfilled")
    for code, f in fields.items():
        if f and code not in used:
            out.append(f"message {code!r} has placeholders {sorted(f)} but no use "
                       f"fills them")
    return out


def test_every_code_has_a_message_and_every_message_a_code():
    assert problems(_sources(), MESSAGES) == []


def test_public_code_lists_are_the_tables():
    """CODES and INV_FREQ_CODES name only codes with messages; INV_FREQ_CODES's
    texts are the table's, and every code the source returns is in one of them."""
    assert set(diagnose.CODES) <= set(MESSAGES)
    inv = diagnose.INV_FREQ_CODES
    assert all(inv[c] == MESSAGES[c] for c in inv)
    assert set(emitted_codes(_sources())) == set(diagnose.CODES) | set(inv)


def test_the_reader_finds_codes_in_every_phase():
    """The ast reader is not vacuous: it sees codes where each phase returns them."""
    codes = emitted_codes(_sources())
    files = {where.split(":")[0] for wheres in codes.values() for where in wheres}
    assert {"rope_fn.py", "explanation.py", "fit.py", "inv_freq.py"} <= files
    assert "not-fitted" in codes and "yarn-no-truncate" in codes


def test_planted_bugs_are_caught():
    # a code returned without a message
    planted = _sources({"explanation.py": ('    return ("scaling", line)',
                                           '    return ("scaling-planted", line)')})
    assert any("'scaling-planted'" in p and "has no message" in p
               for p in problems(planted, MESSAGES))
    # a message dropped from the table
    dropped = {c: m for c, m in MESSAGES.items() if c != "frequency-dtype"}
    assert any(p.startswith("'frequency-dtype' returned at explanation.py:")
               for p in problems(_sources(), dropped))
    # a message nobody returns
    extra = dict(MESSAGES, **{"never-returned": "a finding no phase returns"})
    assert problems(_sources(), extra) == [
        "message 'never-returned': no code in the package returns it"]
    # a placeholder the use does not fill (variable-key use in inv_freq.py)
    holed = dict(MESSAGES, unknown="none of the {count} known variants reproduces it")
    assert any("unfilled" in p for p in problems(_sources(), holed))
    # a literal-key use whose .format misses a keyword
    planted = _sources({"inv_freq.py": ('f"{c}: {MESSAGES[c]}"',
                                        'f"{c}: {MESSAGES[\'unknown\'].format(n=1)}"')})
    assert any("leaves ['count'] unfilled" in p for p in problems(planted, holed))
