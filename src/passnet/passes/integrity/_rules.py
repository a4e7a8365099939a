"""The static layer's vocabulary: what pass code may use, and the :class:`Finding` it reports.

The rules themselves (``Finding.rule``), what each refuses and why, are the static
entries of the integrity registry, :data:`passnet.passes.integrity._checks.CHECKS`;
a :class:`Finding` of a rule that is not registered there cannot be constructed.
This module holds the tables the checks consult (allowed imports, torch and Triton
names, value attributes, forbidden builtins) and the name resolution on the real
modules that the ``import``, ``torch-api`` and ``jit-attr`` rules rely on.
"""

import ast
import functools
import importlib
import inspect
from dataclasses import dataclass
from typing import Any

import torch

from passnet.errors import RegistryError
from passnet.passes.integrity._checks import get_check

__all__ = [
    "FORBIDDEN_BUILTINS",
    "IMPORTABLE",
    "JIT_VALUE_ATTRS",
    "PACKAGE",
    "PASS_FUNCTIONS",
    "TORCH_ALLOWED",
    "TRITON_ALLOWED",
    "TRITON_LANGUAGE_MODULES",
    "VALUE_ATTRS",
    "Finding",
    "allowed",
    "importable",
    "is_dunder",
    "names_a_module",
    "pattern_torch_problem",
    "resolves_to_value",
]

PACKAGE = "pass_dir"
PASS_FUNCTIONS = ("pattern", "replacement_args", "replacement_func")

IMPORTABLE = {
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.fx",
    "triton",
    "triton.language",
    "math",
    "typing",
    "__future__",
}

TORCH_DTYPES = {
    f"torch.{n}" for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype)
}
TORCH_ALLOWED = frozenset(
    {
        # creation (values independent of any input)
        *(
            f"torch.{n}"
            for n in (
                "empty empty_like empty_strided zeros zeros_like ones ones_like full full_like"
            ).split()
        ),
        # types, metadata and memory formats
        *(
            f"torch.{n}"
            for n in (
                "Tensor dtype device Size memory_format finfo iinfo is_tensor is_floating_point "
                "is_complex contiguous_format channels_last channels_last_3d preserve_format "
                "no_grad"
            ).split()
        ),
        "torch.cuda.device",
        "torch.fx.wrap",
        *TORCH_DTYPES,
    }
)

# The triton.language modules a pass may import and name (math functions, libdevice).
TRITON_LANGUAGE_MODULES = frozenset(
    {
        "triton.language",
        "triton.language.math",
        "triton.language.extra",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
    }
)
ALLOWED_MODULES = frozenset({"math", "typing", "__future__", *TRITON_LANGUAGE_MODULES})
"""Modules whose attributes :func:`resolves_to_value` may walk through."""

# typing: the names annotations use. Not its functions (get_type_hints evaluates
# string annotations as code) nor the modules it imports.
TYPING_ALLOWED = frozenset(
    f"typing.{n}"
    for n in (
        "Any Optional Union List Tuple Dict Set FrozenSet Sequence Mapping Iterable Iterator "
        "Callable Type Literal Final TYPE_CHECKING"
    ).split()
)
# The private torch names a pattern may call: the operator namespaces of Dynamo graphs.
PATTERN_PRIVATE_PREFIXES = (
    "torch._C._nn.",
    "torch._C._linalg.",
    "torch._C._fft.",
    "torch._C._special.",
    "torch.ops.",
)
PATTERN_PRIVATE_NAMES = frozenset({"torch._check", "torch._check_is_size", "torch._assert"})

TRITON_ALLOWED = frozenset(
    {
        "triton.jit",
        "triton.autotune",
        "triton.Config",
        "triton.heuristics",
        "triton.cdiv",
        "triton.next_power_of_2",
        "triton.language",
    }
)

# Torch namespaces not even a pattern may touch: tracing the pattern executes it.
PATTERN_DENIED = (
    "torch.cuda",
    "torch.compile",
    "torch._dynamo",
    "torch._inductor",
    "torch.library",
    "torch.utils",
    "torch.backends",
    "torch.multiprocessing",
    "torch.distributed",
    "torch.hub",
    "torch.load",
    "torch.save",
    "torch.jit",
    "torch.export",
    "torch.set_",
    "torch.manual_seed",
    "torch.random",
    "torch.cpu",
    "torch.mps",
    "torch.xpu",
    "torch.profiler",
    "torch.testing",
    "torch.overrides",
    "torch.autograd",
)

VALUE_ATTRS = frozenset(
    (
        # tensor metadata
        "shape dtype device ndim is_cuda is_cpu layout is_contiguous stride size numel dim "
        "data_ptr element_size storage_offset nbytes itemsize is_floating_point is_complex "
        "requires_grad "
        # views and layout
        "view view_as reshape contiguous expand expand_as permute transpose t T mT unsqueeze "
        "squeeze flatten unflatten as_strided narrow select split chunk unbind movedim detach "
        # creation on the input's device / dtype
        "new_empty new_empty_strided new_zeros new_ones new_full zero_ fill_ "
        # a one-element tensor as a Python number
        "item "
        # device / dtype attributes
        "type is_signed index "
        # plain Python containers and strings
        "append extend insert pop get items keys values count join format startswith "
        "endswith lower upper strip replace copy update"
    ).split()
)
INFO_ATTRS = frozenset("eps max min tiny bits resolution smallest_normal".split())


def _triton_value_attrs() -> frozenset[str]:
    names = {"shape", "dtype", "type", "numel", "value", "element_ty", "name"}
    try:
        import triton.language as tl
    except ImportError:  # no Triton: no kernels to check either
        return frozenset(names)
    for cls in (tl.tensor, tl.dtype, tl.pointer_type, tl.block_type, tl.constexpr):
        names.update(n for n in dir(cls) if not n.startswith("_"))
    return frozenset(names)


JIT_VALUE_ATTRS = _triton_value_attrs()
"""Inside ``@triton.jit`` kernels, the attributes a value may have: those of Triton's
tensors, dtypes and constexprs. Under ``TRITON_INTERPRET=1`` a kernel runs as Python on
host objects (``x_ptr.handle`` is a numpy array), whose other attributes reach the host."""

FORBIDDEN_BUILTINS = frozenset(
    "eval exec compile getattr setattr delattr globals locals vars dir open input id "
    "memoryview super breakpoint exit quit help".split()
)
MUTABLE_NODES = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
MODULE_LEVEL_CALLS = frozenset(
    {
        "triton.Config",
        "triton.cdiv",
        "triton.next_power_of_2",
        "triton.language.constexpr",
        "torch.fx.wrap",
        "torch.device",
        "torch.finfo",
        "torch.iinfo",
    }
)
BINARY_SUFFIXES = (".so", ".pyd", ".pyc", ".pyo", ".dll", ".dylib", ".pth", ".egg", ".whl")


@dataclass(frozen=True)
class Finding:
    """One violation: where (file relative to the pass directory, line, column) and which rule."""

    file: str
    line: int
    col: int
    rule: str
    message: str
    code: str = ""
    """The offending source line, stripped."""

    def __post_init__(self) -> None:
        # Every rule is a registered static check: a typo or a new rule without its
        # registry entry fails where it is emitted, not silently in a report.
        check = get_check(self.rule)
        if check.layer != "static":
            raise RegistryError(
                f"a Finding's rule must be a static integrity check; {self.rule!r} is a "
                f"{check.layer} check"
            )

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: [{self.rule}] {self.message}"


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def allowed(qualname: str, in_pattern: bool) -> bool:
    """May code use the object ``qualname`` (a value, not a module to descend into)?"""
    root = qualname.split(".", 1)[0]
    if root == "torch":
        if in_pattern:
            return pattern_torch_problem(qualname) is None
        return qualname in TORCH_ALLOWED
    if root == "triton":
        if qualname in TRITON_ALLOWED:
            return True
        return qualname.startswith("triton.language.") and resolves_to_value(qualname)
    if root == "typing":
        return qualname in TYPING_ALLOWED
    if root in ("math", "__future__"):
        return resolves_to_value(qualname)
    return False  # pass_dir names are judged by the checker, against the helper's definitions


def pattern_torch_problem(qualname: str) -> str | None:
    """Why ``pattern`` may not use the torch name ``qualname`` (None: it may).

    A pattern is traced, and tracing runs it in the evaluation child, so it may call
    torch's operators but reach nothing else through torch: the name is resolved on
    the real modules, every module on the way must be torch's own (``torch.sys``,
    ``torch.os`` are not), and private names only those of the operator namespaces
    that Dynamo graphs call (``torch._C._nn.linear``, ``torch.ops.aten.*``).
    """
    if qualname == "torch" or qualname.startswith(PATTERN_DENIED):
        return "not even in pattern (tracing the pattern executes it)"
    private = any(part.startswith("_") for part in qualname.split(".")[1:])
    if private and not (
        qualname.startswith(PATTERN_PRIVATE_PREFIXES) or qualname in PATTERN_PRIVATE_NAMES
    ):
        return "a private name outside torch's operator namespaces"
    path = _resolve(qualname)
    if path is None:
        return f"it does not exist in torch {torch.__version__}"
    for obj in path[1:]:
        if inspect.ismodule(obj) and not (
            obj.__name__ == "torch" or obj.__name__.startswith("torch.")
        ):
            return f"it leads into the module {obj.__name__!r}"
    if inspect.ismodule(path[-1]):
        return "it is a module"
    return None


def importable(module: str) -> bool:
    """May a pass import ``module`` (``import m`` or ``from m import ...``)?"""
    return module in IMPORTABLE or module in TRITON_LANGUAGE_MODULES


_MISSING = object()
_RESOLVABLE_ROOTS = ("torch", "triton", "math", "typing", "__future__")


@functools.lru_cache(maxsize=4096)
def _resolve(qualname: str) -> tuple[Any, ...] | None:
    """The objects along ``qualname``, from its root module to its end; None where a step is missing.

    A submodule not imported yet is imported only if a pass may import it.
    """
    parts = qualname.split(".")
    if parts[0] not in _RESOLVABLE_ROOTS:
        return None
    try:
        obj: Any = importlib.import_module(parts[0])
    except ImportError:
        return None
    path = [obj]
    for part in parts[1:]:
        value = getattr(obj, part, _MISSING)
        if value is _MISSING and inspect.ismodule(obj):
            candidate = f"{obj.__name__}.{part}"
            if candidate in ALLOWED_MODULES or candidate in IMPORTABLE:
                value = importlib.import_module(candidate)
        if value is _MISSING:
            return None
        path.append(value)
        obj = value
    return tuple(path)


def resolves_to_value(qualname: str) -> bool:
    """Does ``qualname`` name an existing object, not a module, reached through allowed modules only?

    ``typing``, ``triton.language`` and its submodules hold other modules as
    attributes (``typing.sys``, ``tl.core.builtins``, Triton's ``knobs.os``): a
    prefix rule would let ``typing.sys.modules[...]`` or
    ``tl.core.builtins.getattr`` through. So the name is resolved on the real
    modules, one attribute at a time, and every module on the way must be one a
    pass may import; the end must not be a module at all (it may only be used as
    ``module.<name>``). A name that does not resolve here is refused too.
    """
    root = "triton.language" if qualname.startswith("triton.") else qualname.split(".", 1)[0]
    if root not in ALLOWED_MODULES or not qualname.startswith(root + "."):
        return False
    steps = qualname[len(root) + 1 :].split(".")
    if any(part.startswith("_") for part in steps):
        return False  # private or dunder: never part of the allowed surface
    path = _resolve(qualname)
    if path is None:
        return False
    beyond_root = path[len(path) - len(steps) :]
    if any(inspect.ismodule(o) and o.__name__ not in ALLOWED_MODULES for o in beyond_root):
        return False
    return not inspect.ismodule(path[-1])


def names_a_module(qualname: str) -> bool:
    """Is ``qualname`` (rooted at torch, triton, math, typing or __future__) a module here?

    Unresolvable names count as modules: a chain may only continue past an
    allowed prefix when that prefix is a known value (``torch.float16.itemsize``).
    """
    if qualname.split(".", 1)[0] not in _RESOLVABLE_ROOTS:
        return False
    path = _resolve(qualname)
    return path is None or inspect.ismodule(path[-1])
