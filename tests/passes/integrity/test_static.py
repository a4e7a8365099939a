"""The static integrity layer: each rule fires on its violation, at the right file and line,
and honest pass code (metadata, creation, views, Triton kernels, read-only tables) passes."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from passnet.errors import PassLoadError, PassRejected
from passnet.passes.integrity import check_pass_dir, inspect_pass_dir

TEMPLATE = """\
import torch
import triton
import triton.language as tl
{HEADER}


@triton.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.sum(x, axis=0) * 0 + tl.maximum(x, 0.0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@torch.fx.wrap
def fused(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    {BODY}
    _kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out


def pattern(in_0):
    return torch.relu(in_0)


def replacement_args(in_0):
    return (in_0,)


def replacement_func():
    return fused
"""


def render(header: str = "", body: str = "pass") -> tuple[str, int, int]:
    """The pass source with ``header``/``body`` spliced in, and their first lines."""
    body = textwrap.indent(textwrap.dedent(body), "    ").lstrip()
    source = TEMPLATE.replace("{HEADER}", header).replace("{BODY}", body)
    lines = TEMPLATE.splitlines()
    header_line = next(i for i, s in enumerate(lines, 1) if "{HEADER}" in s)
    body_line = next(i for i, s in enumerate(lines, 1) if "{BODY}" in s)
    body_line += header.count("\n")
    return source, header_line, body_line


def findings_of(
    pass_dir: Callable[..., Path], files: dict[str, str], order: list[str] | None = None
):
    folder = pass_dir(files, order)
    return inspect_pass_dir(folder)


def test_honest_pass_has_no_finding(pass_dir: Callable[..., Path]) -> None:
    source, _, _ = render()
    assert findings_of(pass_dir, {"Relu.py": source}) == []


VIOLATIONS = [
    # (id, header, body, rule, where)
    ("torch-call", "", "y = torch.relu(x)", "torch-api", "body"),
    ("functional", "import torch.nn.functional as F", "y = F.relu(x)", "torch-api", "body"),
    ("torch-ops", "", "y = torch.ops.aten.relu.default(x)", "torch-api", "body"),
    ("torch-compile", "", "y = torch.compile(fused)", "torch-api", "body"),
    ("cuda-stream", "", "s = torch.cuda.Stream()", "torch-api", "body"),
    ("cuda-event", "", "e = torch.cuda.Event(enable_timing=True)", "torch-api", "body"),
    ("torch-library", "", "lib = torch.library.Library('x', 'DEF')", "torch-api", "body"),
    ("tensor-class-method", "", "y = torch.Tensor.relu(x)", "tensor-method", "body"),
    ("tensor-method", "", "y = x.relu()", "tensor-method", "body"),
    ("tensor-to", "", "y = x.to(torch.float16)", "tensor-method", "body"),
    ("tensor-clone", "", "y = x.clone()", "tensor-method", "body"),
    ("type-method", "", "y = type(x).relu(x)", "tensor-method", "body"),
    ("getattr", "", "f = getattr(torch, 'relu')", "builtin", "body"),
    ("getattr-alias", "", "g = getattr", "builtin", "body"),
    ("eval", "", "g = eval('1')", "builtin", "body"),
    ("exec", "", "exec('y = 1')", "builtin", "body"),
    ("open-read", "", "h = open('expected.pt', 'rb')", "builtin", "body"),
    ("open-write", "", "h = open('/tmp/out.txt', 'w')", "builtin", "body"),
    ("pointer-id", "", "k = id(x)", "builtin", "body"),
    ("dynamic-class", "", "T = type('T', (), {})", "builtin", "body"),
    ("torch-dict", "", "d = torch.__dict__", "dunder", "body"),
    ("dunder-class", "", "c = x.__class__", "dunder", "body"),
    ("builtins", "", "b = __builtins__", "dunder", "body"),
    ("import-os", "import os", "pass", "import", "header"),
    ("import-gc", "import gc", "pass", "import", "header"),
    ("import-threading", "import threading", "pass", "import", "header"),
    ("import-time", "import time", "pass", "import", "header"),
    ("import-importlib", "import importlib", "pass", "import", "header"),
    ("import-functools", "from functools import lru_cache", "pass", "import", "header"),
    ("import-sys", "import sys", "pass", "import", "header"),
    ("import-ctypes", "import ctypes", "pass", "import", "header"),
    ("import-numpy", "import numpy", "pass", "import", "header"),
    ("import-triton-runtime", "import triton.runtime", "pass", "import", "header"),
    ("import-in-function", "", "import math", "import", "body"),
    ("star-import", "from torch import *", "pass", "import", "header"),
    ("cache-store", "_CACHE = {}", "_CACHE[n] = out", "state", "body"),
    ("cache-update", "_CACHE = {}", "_CACHE.update({n: out})", "state", "body"),
    ("call-counter", "_CALLS = [0]", "_CALLS.append(1)", "state", "body"),
    ("table-alias", "_CACHE = {}", "c = _CACHE", "state", "body"),
    ("global", "COUNTER = 0", "global COUNTER", "state", "body"),
    ("function-attribute", "", "fused.calls = 1", "state", "body"),
    ("patch-event", "", "torch.cuda.Event = None", "state", "body"),
    ("module-object", "_STATE = object()", "pass", "state", "header"),
    ("module-tensor", "_BUF = torch.empty(4)", "pass", "state", "header"),
    ("mutable-default", "", "def inner(a, cache={}):\n    return a", "state", "body"),
    ("class", "class Lazy(torch.Tensor):\n    pass", "pass", "class", "header"),
    ("try", "", "try:\n    y = 1\nexcept Exception:\n    y = 2", "try", "body"),
    ("pattern-ref", "", "y = pattern(x)", "pattern-ref", "body"),
    ("module-loop", "for _i in range(2):\n    pass", "pass", "module", "header"),
    # a container inside an immutable-looking value keeps state as well as a table does
    ("dict-in-tuple", "_BOX = ({},)", "pass", "state", "header"),
    ("list-in-table", "_B = [[]]", "pass", "state", "header"),
    ("tuple-default", "", "def inner(a, box=({},)):\n    return a", "state", "body"),
    ("lambda-default", "", "f = lambda a, box=([],): box", "state", "body"),
    ("typing-function", "import typing", "h = typing.get_type_hints(fused)", "import", "body"),
    ("string-annotation", "", "def inner(a: 'x'):\n    return a", "annotation", "body"),
    ("unbound-name", "", "m = inspect.sys", "name", "body"),
]


@pytest.mark.parametrize(
    ("header", "body", "rule", "where"),
    [v[1:] for v in VIOLATIONS],
    ids=[v[0] for v in VIOLATIONS],
)
def test_violation_is_found_at_its_line(
    pass_dir: Callable[..., Path], header: str, body: str, rule: str, where: str
) -> None:
    source, header_line, body_line = render(header, body)
    found = findings_of(pass_dir, {"Relu.py": source})
    line = header_line if where == "header" else body_line
    assert ("Relu.py", line, rule) in {(f.file, f.line, f.rule) for f in found}, found
    hit = next(f for f in found if f.line == line and f.rule == rule)
    assert hit.code == source.splitlines()[line - 1].strip()


ALLOWED = [
    (
        "read-only-table",
        "_TABLE = {torch.float16: 1}",
        "k = _TABLE[x.dtype] if x.dtype in _TABLE else len(_TABLE)",
    ),
    ("finfo", "", "s = torch.finfo(x.dtype).max"),
    ("creation", "", "z = torch.zeros((n,), device=x.device, dtype=torch.float32)\nz.zero_()"),
    ("views", "", "v = x.view(-1).reshape(n).unsqueeze(0).permute(1, 0).t()"),
    ("new-empty", "", "w = x.new_empty((2,))\nshape = list(x.shape)\nshape[0] = 1"),
    ("device-context", "", "with torch.cuda.device(x.device):\n    pass"),
    ("scalar-read", "", "if x.numel() == 1:\n    v = float(x.item())"),
    (
        "constants",
        "BLOCK = 1024\n_CONFIGS = [triton.Config({'BLOCK': 128}, num_warps=4)]",
        "b = BLOCK * 2",
    ),
    ("math", "import math", "r = math.sqrt(n)"),
    (
        "immutable-default",
        "",
        "def inner(a, shape=(1, (2, 3)), dtype=torch.float16):\n    return a",
    ),
    (
        "typing-annotation",
        "import typing",
        "def inner(a: typing.Optional[int]) -> typing.Any:\n    return a",
    ),
    ("table-of-tuples", "_T = {torch.float16: (1, 2.0)}", "k = _T[x.dtype]"),
    ("errors", "", "if x.dim() > 8:\n    raise ValueError(f'bad shape {tuple(x.shape)}')"),
]


@pytest.mark.parametrize(("header", "body"), [a[1:] for a in ALLOWED], ids=[a[0] for a in ALLOWED])
def test_honest_code_is_not_flagged(pass_dir: Callable[..., Path], header: str, body: str) -> None:
    source, _, _ = render(header, body)
    assert findings_of(pass_dir, {"Relu.py": source}) == []


def test_pattern_may_use_torch_but_not_side_effects(pass_dir: Callable[..., Path]) -> None:
    source, _, _ = render()
    source = source.replace(
        "    return torch.relu(in_0)",
        "    t = torch.nn.functional.gelu(in_0.float().sum(1))\n    return torch.relu(t)",
    )
    assert findings_of(pass_dir, {"Relu.py": source}) == []
    source = source.replace(
        "    return torch.relu(t)", "    torch.cuda.synchronize()\n    return open('x')"
    )
    rules = {f.rule for f in findings_of(pass_dir, {"Relu.py": source})}
    assert rules == {"torch-api", "builtin"}


def test_pattern_torch_names_stay_in_torch(pass_dir: Callable[..., Path]) -> None:
    # Tracing runs the pattern in the evaluation child: torch's operators, yes; modules
    # that torch holds as attributes (torch.sys, torch.os) and other private names, no.
    source, _, _ = render()
    ops = (
        "    a = torch._C._nn.linear(in_0, in_0)\n"
        "    torch.ops.aten._assert_scalar.default(True, 'x')\n"
        "    return torch.relu(a)"
    )
    assert (
        findings_of(pass_dir, {"Relu.py": source.replace("    return torch.relu(in_0)", ops)}) == []
    )
    for bad, why in [
        ("torch.sys.modules", "leads into the module 'sys'"),
        ("torch.os.system", "leads into the module 'os'"),
        ("torch._C._set_grad_enabled", "private name"),
    ]:
        found = findings_of(
            pass_dir,
            {
                "Relu.py": source.replace(
                    "return torch.relu(in_0)", f"x = {bad}\n    return torch.relu(in_0)"
                )
            },
        )
        assert [(f.rule, why in f.message) for f in found] == [("torch-api", True)], found


def test_kernels_use_values_only_through_tritons_attributes(pass_dir: Callable[..., Path]) -> None:
    source, _, _ = render()
    bad = source.replace(
        "    mask = offs < n\n", "    mask = offs < n\n    h = x_ptr.handle.data\n"
    )
    found = findings_of(pass_dir, {"Relu.py": bad})
    assert {(f.rule, f.message.split("`")[1]) for f in found} == {
        ("jit-attr", ".data"),
        ("jit-attr", ".handle"),
    }


def test_a_helper_gives_access_to_its_own_definitions_only(pass_dir: Callable[..., Path]) -> None:
    helper = "import torch\n\nSCALE = 2\n\n\ndef size(x):\n    return x.numel() * SCALE\n"
    source, _, body_line = render(
        "from pass_dir import kernels\nfrom pass_dir.kernels import size",
        "m = size(x) + kernels.SCALE",
    )
    assert findings_of(pass_dir, {"Relu.py": source, "kernels.py": helper}, ["Relu"]) == []
    source, _, body_line = render("from pass_dir import kernels", "t = kernels.torch.relu")
    found = findings_of(pass_dir, {"Relu.py": source, "kernels.py": helper}, ["Relu"])
    assert [(f.line, f.rule) for f in found] == [(body_line, "import")], found
    source, header_line, _ = render("from pass_dir.kernels import torch as T2", "t = T2.relu")
    found = findings_of(pass_dir, {"Relu.py": source, "kernels.py": helper}, ["Relu"])
    assert ("import", "`pass_dir.kernels.torch` is not a function or constant") in {
        (f.rule, f.message[:54]) for f in found
    }, found


@pytest.mark.parametrize(
    ("returned", "ok"),
    [
        ("(in_1, in_0, 'D96', 1e-05, torch.float32, None, -1, (3, 3))", True),
        ("in_0", True),
        ("(in_0 + in_1,)", False),
        ("(in_0.contiguous(), in_1)", False),
        ("(fused(in_0), in_1)", False),
        ("(in_0[0], in_1)", False),
        ("(in_0, torch.relu)", False),
    ],
)
def test_replacement_args_may_only_select_and_add_literals(
    pass_dir: Callable[..., Path], returned: str, ok: bool
) -> None:
    source, _, _ = render()
    source = source.replace(
        "def pattern(in_0):\n    return torch.relu(in_0)",
        "def pattern(in_0, in_1):\n    return torch.relu(in_0 + in_1)",
    )
    source = source.replace(
        "def replacement_args(in_0):\n    return (in_0,)",
        f"def replacement_args(in_0, in_1):\n    return {returned}",
    )
    rules = [f.rule for f in findings_of(pass_dir, {"Relu.py": source})]
    assert (rules == []) if ok else ("replacement-args" in rules)


def test_replacement_args_arity_must_equal_the_patterns(pass_dir: Callable[..., Path]) -> None:
    source, _, _ = render()
    source = source.replace("def replacement_args(in_0):", "def replacement_args(in_0, in_1):")
    found = findings_of(pass_dir, {"Relu.py": source})
    assert [f.rule for f in found] == ["replacement-args"]
    assert "pattern takes 1" in found[0].message


@pytest.mark.parametrize(
    "body",
    [
        "return lambda x: x",
        "def inner(x):\n        return x\n    return inner",
        "return _kernel",
        "return torch.relu",
        "return fused if True else fused",
        "return undefined_name",
        "return pattern",
    ],
)
def test_replacement_func_must_return_a_module_level_wrapper(
    pass_dir: Callable[..., Path], body: str
) -> None:
    source, _, _ = render()
    source = source.replace(
        "def replacement_func():\n    return fused", f"def replacement_func():\n    {body}"
    )
    rules = {f.rule for f in findings_of(pass_dir, {"Relu.py": source})}
    assert "replacement-func" in rules or "pattern-ref" in rules


def test_helpers_are_inspected_and_may_hold_the_wrapper(pass_dir: Callable[..., Path]) -> None:
    source, _, _ = render()
    head, _, _ = source.partition("def pattern(")
    helper = head.replace("@torch.fx.wrap\n", "")
    rule = (
        "import torch\nfrom pass_dir.helper import fused\n\n\n"
        "def pattern(in_0):\n    return torch.relu(in_0)\n\n\n"
        "def replacement_args(in_0):\n    return (in_0,)\n\n\n"
        "def replacement_func():\n    return fused\n"
    )
    assert findings_of(pass_dir, {"Relu.py": rule, "helper.py": helper}, ["Relu"]) == []
    bad = helper.replace("    return out", "    return torch.relu(x)")
    found = findings_of(pass_dir, {"Relu.py": rule, "helper.py": bad}, ["Relu"])
    assert [(f.file, f.rule) for f in found] == [("helper.py", "torch-api")]


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("from pass_dir.helper import pattern", "pattern-ref"),
        ("from pass_dir.missing import fused", "import"),
        ("from .helper import fused as f2", None),
        ("import pass_dir.helper as h\nX = h.pattern", "pattern-ref"),
    ],
)
def test_package_imports(pass_dir: Callable[..., Path], line: str, rule: str | None) -> None:
    source, _, _ = render(line)
    helper = "def fused(x):\n    return x\n\n\ndef pattern(x):\n    return x\n"
    rules = {
        f.rule for f in findings_of(pass_dir, {"Relu.py": source, "helper.py": helper}, ["Relu"])
    }
    assert rules == ({rule} if rule else set())


def test_missing_pass_functions_are_format_findings(pass_dir: Callable[..., Path]) -> None:
    found = findings_of(
        pass_dir, {"Relu.py": "import torch\n\n\ndef pattern(in_0):\n    return torch.relu(in_0)\n"}
    )
    assert {(f.rule, f.message) for f in found} == {
        ("format", "pass file must define replacement_args() at module level"),
        ("format", "pass file must define replacement_func() at module level"),
    }


def test_compiled_code_symlinks_and_syntax_errors_are_file_findings(
    pass_dir: Callable[..., Path], tmp_path: Path
) -> None:
    source, _, _ = render()
    folder = pass_dir({"Relu.py": source, "broken.py": "def f(:\n"})
    (folder / "helper.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (folder / "stale.pyc").write_bytes(b"\x00")
    os.symlink(tmp_path / "elsewhere.py", folder / "link.py")
    found = {(f.file, f.rule) for f in inspect_pass_dir(folder)}
    assert found == {
        ("broken.py", "format"),
        ("helper.cpython-311-x86_64-linux-gnu.so", "file"),
        ("stale.pyc", "file"),
        ("link.py", "file"),
    }


def test_an_unreadable_pass_file_is_one_finding(pass_dir: Callable[..., Path]) -> None:
    source, _, _ = render()
    folder = pass_dir({"Relu.py": source})
    (folder / "Relu.py").write_bytes(b"x = 1\n\xff\xfe\n")
    found = [(f.file, f.rule, f.message.split(":")[0]) for f in inspect_pass_dir(folder)]
    # not also "pass 'Relu' has no file Relu.py" in the manifest
    assert found == [("Relu.py", "format", "cannot read as UTF-8 text")]


def test_inspection_never_executes_pass_code(pass_dir: Callable[..., Path], tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    source, _, _ = render(f"open({str(marker)!r}, 'w').write('x')")
    found = findings_of(pass_dir, {"Relu.py": source})
    assert {"builtin", "module"} <= {f.rule for f in found}
    assert not marker.exists()


def test_check_pass_dir_raises_rejected_with_every_finding(pass_dir: Callable[..., Path]) -> None:
    source, _, body_line = render("import os", "y = torch.relu(x)")
    folder = pass_dir({"Relu.py": source})
    with pytest.raises(PassRejected) as info:
        check_pass_dir(folder)
    ctx = info.value.context
    assert (ctx["file"], ctx["line"], ctx["rule"]) == ("Relu.py", "4", "import")
    assert f"Relu.py:{body_line}:" in ctx["findings"]
    assert "(and 1 more)" in info.value.message


def test_format_only_problems_raise_a_load_error(pass_dir: Callable[..., Path]) -> None:
    folder = pass_dir({"Relu.py": "import torch\n"})
    with pytest.raises(PassLoadError):
        check_pass_dir(folder)


def _reference_pass_folders() -> list[Path]:
    try:
        from passnet.passes.library import reference_passes
    except ImportError:
        return []
    return [p.folder for p in reference_passes()]


@pytest.mark.parametrize("folder", _reference_pass_folders(), ids=lambda p: p.name)
def test_reference_passes_of_the_library_pass_the_static_layer(folder: Path) -> None:
    assert inspect_pass_dir(folder) == []
