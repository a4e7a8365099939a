"""The one list of integrity checks: what is checked, in which layer, and why.

Every defense against adversarial pass files is a named :class:`Check` in :data:`CHECKS`,
with the threat it catches and its rationale. The name is what the layers emit, so
nothing can be checked without being listed here:

* ``static`` — a rule of the AST inspection; its name is the ``Finding.rule`` of a
  violation (:class:`~passnet.passes.integrity._rules.Finding` refuses any other name);
* ``dispatch`` — the runtime guard around replacement functions; its rejections carry
  ``context["rule"] == "dispatch"``;
* ``harness`` — what the evaluation child checks or arranges around the compiled calls.
  ``input-mutation`` and ``output-alias`` are findings that start with the check's name
  (``"input-mutation: compiled code mutated input 0, ..."``) and end as
  ``pass_rejected``; the others are mechanisms under which a cheat simply computes
  wrong outputs, so what they expose ends as a correctness failure.

Each defense lists the red-team exploits (folders of
``tests/passes/integrity/redteam/exploits/``) it must catch; the red-team suite is
driven by this list. ``docs/passes.md`` renders it (``python tools/gen_integrity_doc.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from passnet.errors import RegistryError
from passnet.status import Status

__all__ = ["CHECKS", "LAYERS", "Check", "Layer", "get_check"]

Layer = Literal["static", "dispatch", "harness"]
LAYERS: tuple[Layer, ...] = ("static", "dispatch", "harness")

_NAME = re.compile(r"[a-z]+(-[a-z]+)*")
_REJECTED = (Status.PASS_REJECTED,)


@dataclass(frozen=True)
class Check:
    """One integrity check: a named defense, its layer, the threat it catches and why."""

    name: str
    """What the layer emits: a static ``Finding.rule``, the guard's ``rule``, the prefix of
    a harness finding."""
    layer: Layer
    threat: str
    """The cheat it catches, in one phrase (Markdown)."""
    rationale: str
    """What exactly it refuses or arranges, and why (Markdown)."""
    statuses: tuple[Status, ...] = _REJECTED
    """How an evaluation caught by this check ends: ``pass_rejected`` for the rules and the
    harness's findings; a correctness status for a harness mechanism."""
    exploits: tuple[str, ...] = ()
    """Red-team exploit folders this check must catch (the red-team suite asserts it)."""
    defense: bool = True
    """False for a check of mere format validity, which needs no exploit."""

    def __post_init__(self) -> None:
        # A malformed entry is a programming error: fail at import, not in a report.
        if not _NAME.fullmatch(self.name):
            raise RegistryError(f"integrity check name {self.name!r} is not kebab-case")
        if self.layer not in LAYERS:
            raise RegistryError(
                f"integrity check {self.name!r}: layer {self.layer!r} is not one of {LAYERS}"
            )
        if not self.statuses:
            raise RegistryError(f"integrity check {self.name!r} lists no outcome status")

    @property
    def rejects(self) -> bool:
        """Whether a pass caught by this check ends ``pass_rejected`` (else: a correctness failure)."""
        return Status.PASS_REJECTED in self.statuses

    @property
    def outcome(self) -> str:
        """The statuses it ends with, in words (for the documentation)."""
        names = " / ".join(f"`{s.value}`" for s in self.statuses)
        return names if self.rejects else f"correctness failure: {names}"


_NOT_REJECTED = (
    "A harness mechanism: what it exposes ends as a correctness failure, not `pass_rejected`."
)

CHECKS: tuple[Check, ...] = (
    # -- static: AST inspection of every file of the pass directory, before any of it runs
    Check(
        "import",
        "static",
        threat="escaping the rules through another module: threads, timers, `gc`, "
        "`os`/`sys`/`io`, `importlib`, `ctypes`, caches; and the modules allowed packages "
        "hold as attributes (`typing.sys`, `tl.core.builtins`, Triton's `knobs.os`)",
        rationale="Only `torch` (and `torch.nn`, `torch.nn.functional`, `torch.fx`), `triton`, "
        "`triton.language` (and its `math`, `extra`, `extra.libdevice`, `extra.cuda.libdevice` "
        "modules), `math`, `typing`, `__future__` and the pass package itself "
        "(`pass_dir.<helper>` or one level of relative import) may be imported, at module "
        "level only, never with `*`, and an imported name may not be rebound. Names of "
        "`math` and `triton.language` are resolved on the real modules, one attribute at a "
        "time, in kernels too: a module, a private name or a name that does not exist is "
        "refused (a prefix rule would let `typing.sys.modules[...]` or "
        "`tl.core.builtins.getattr` through). Of `typing`, only the names annotations use "
        "(`Optional`, `Tuple`, `Any`, ...), not its functions (`get_type_hints` evaluates "
        "string annotations as code). Through a helper (`pass_dir.kernels.<name>`, "
        "`from pass_dir.kernels import <name>`) only the helper's own functions and "
        "constants are reachable, not what it imports (`kernels.torch.utils...`). This "
        "shuts out every route around the other rules.",
        exploits=(
            "importlib_delegation",
            "sys_modules",
            "typing_escape",
            "thread_offload",
            "time_patching",
            "gc_scraping",
            "helper_reexport",
        ),
    ),
    Check(
        "torch-api",
        "static",
        threat="delegating the computation to torch (`torch.matmul`, `F.*`, `torch.ops`, "
        "`torch.compile`) or tampering with it (`torch.cuda.Stream`/`Event`, `torch.library`)",
        rationale="Outside `pattern`, torch may only create tensors and read metadata: "
        "`torch.empty`/`empty_like`/`empty_strided`, `zeros[_like]`, `ones[_like]`, "
        "`full[_like]`, dtypes, memory formats, `torch.Tensor`/`dtype`/`device`/`Size`, "
        "`finfo`/`iinfo`, `is_tensor`/`is_floating_point`/`is_complex`, `torch.no_grad`, "
        "`torch.cuda.device` and `torch.fx.wrap`; a module may not be used as a value. Of "
        "`triton`, only `jit`, `autotune`, `Config`, `heuristics`, `cdiv`, `next_power_of_2` "
        "and `triton.language` (its runtime is not for pass code). `pattern` may call torch's "
        "operators, since it is only traced as the template, but not namespaces with side "
        "effects at trace time (`torch.cuda`, `torch.compile`, `torch._dynamo`, "
        "`torch.library`, `torch.utils`, `torch.load`/`save`, ...); and since tracing runs it "
        "in the evaluation child, its names are resolved on the real modules: every module on "
        "the way must be torch's own (`torch.sys`, `torch.os` are not), and a private name "
        "must be in an operator namespace of Dynamo graphs (`torch._C._nn.*`, `torch.ops.*`).",
        exploits=(
            "torch_delegation",
            "functional_delegation",
            "torch_ops_delegation",
            "torch_compile_delegation",
            "triton_module_escape",
            "helper_delegation",
            "extra_stream",
            "pattern_module_escape",
        ),
    ),
    Check(
        "tensor-method",
        "static",
        threat="computing through tensor methods outside a kernel (`x.sum()`, `x.to()`, "
        "`x.clone()`, `type(x).relu`) or reaching state through attributes (`kernel.cache`)",
        rationale="Outside `pattern` and `@triton.jit` kernels, an attribute of a value must "
        "be metadata (`shape`, `stride`, `dtype`, `device`, `numel`, `dim`, `data_ptr`, ...), "
        "a view or layout method (`view`, `reshape`, `contiguous`, `permute`, `transpose`, "
        "`expand`, `unsqueeze`, `flatten`, `split`, `unbind`, ...), creation on the input's "
        "device and dtype (`new_empty`, `new_zeros`, `zero_`, `fill_`, ...), `item`, or a "
        "plain container/string method. The computation belongs in a kernel.",
        exploits=("tensor_method_delegation", "tensor_type_delegation"),
    ),
    Check(
        "builtin",
        "static",
        threat="dynamic delegation (`getattr`, `eval`), reading expected outputs from or "
        "writing outside the pass directory (`open`), pointer-keyed caches (`id`)",
        rationale="`eval`, `exec`, `compile`, `getattr`/`setattr`/`delattr`, "
        "`globals`/`locals`/`vars`/`dir`, `open`, `input`, `id`, `memoryview`, `super`, "
        "`breakpoint`, `exit`/`quit`, `help` and three-argument `type` (dynamic classes) are "
        "refused, even when only named: a name can be passed on and called elsewhere.",
        exploits=("getattr_delegation", "eval_delegation", "file_read", "file_write"),
    ),
    Check(
        "dunder",
        "static",
        threat="reaching interpreter internals through dunders (`__dict__`, `__class__`, "
        "`__import__`, `__globals__`, `__torch_dispatch__`)",
        rationale="No dunder name or attribute, anywhere (imports included): from any value "
        "they lead to modules, globals and the dispatch machinery, past every name-based rule.",
        exploits=("dict_delegation",),
    ),
    Check(
        "name",
        "static",
        threat="names the Triton interpreter puts into a kernel's module (`inspect`, `np`, "
        "`time`): `inspect.sys.modules` reaches the harness",
        rationale="A bare name must be a local, a module-level name of the same file or a "
        "builtin. Under `TRITON_INTERPRET=1` Triton copies its own globals into a kernel's "
        "module, where a name the file does not bind would find them.",
        exploits=("interpreter_globals",),
    ),
    Check(
        "jit-attr",
        "static",
        threat="reaching the host through the interpreter's objects inside a kernel "
        "(`x_ptr.handle.data.ctypes._ctypes._sys` is `sys`)",
        rationale="Inside `@triton.jit` kernels a value may only be used through the "
        "attributes of Triton's tensors, dtypes and constexprs (`x.to(tl.float32)`, "
        "`ptr.dtype.element_ty`), and a chain that starts at a module (`tl.…`) may not "
        "continue past a module that is not allowed, nor into private names: under "
        "`TRITON_INTERPRET=1` a kernel runs as Python on host objects (`x_ptr.handle` is a "
        "numpy array).",
        exploits=("value_private_attr",),
    ),
    Check(
        "annotation",
        "static",
        threat="code in a string annotation, run by `typing.get_type_hints`",
        rationale="No string annotations: they are code the checker does not see, and "
        "annotation tools evaluate them.",
        exploits=("annotation_eval",),
    ),
    Check(
        "state",
        "static",
        threat="state kept between calls: output caches keyed on pointers, shapes or call "
        "counts; patched timers, `torch.cuda.Event` or harness functions",
        rationale="No `global`/`nonlocal`, no attribute assignment, no assignment into "
        "anything but a local variable, no default argument that is not immutable (a tuple "
        "holding a dict is not), no module-level value other than immutable ones (constants, "
        "tuples of them), `triton.Config(...)`/`math` calls and tables (list/set/dict) of "
        "immutable values; and a module-level table, or a helper's, may only be read "
        "(`T[k]`, `k in T`, `for k in T`, `len(T)`) inside functions. Nothing survives from "
        "one call to the next, so outputs cannot be cached, and nothing can be patched.",
        exploits=(
            "timer_patching",
            "output_cache",
            "call_count_cache",
            "container_cache",
            "draw_cache",
        ),
    ),
    Check(
        "class",
        "static",
        threat="tensor subclasses and lazy tensors that compute when compared, descriptors, "
        "operator overloading",
        rationale="No class definitions in pass code: a class can hook dispatch "
        "(`__torch_dispatch__`), comparison and attribute access.",
        exploits=("lazy_subclass",),
    ),
    Check(
        "try",
        "static",
        threat="behaving differently when watched: catching the dispatch guard's rejection "
        "and falling back",
        rationale="No `try` statement (nor `try`/`except*`): a pass must not swallow the "
        "runtime guard's rejection. The guard also records the violation and rejects the call "
        "after it returns, whatever the pass does with the exception.",
        exploits=("guard_evasion",),
    ),
    Check(
        "async",
        "static",
        threat="code hidden in a coroutine, whose body the checker does not walk, driven "
        "from a replacement",
        rationale="No coroutines (`async def`, `await`, `async for`, `async with`): their "
        "bodies are not inspected, so they are refused whole.",
        exploits=("coroutine_body",),
    ),
    Check(
        "module",
        "static",
        threat="code run once at import, outside every checked call: a module-level loop "
        "that fills a table with buffers a kernel can cache results in",
        rationale="At module level only imports, function definitions, constant assignments, "
        'docstrings and `torch.fx.wrap("name")`: the module body, which the loader runs, only '
        "declares, so what a file defines is known before the other rules judge it.",
        exploits=("import_time_buffer",),
    ),
    Check(
        "pattern-ref",
        "static",
        threat="borrowing `pattern`'s exemption from the torch rules by calling it",
        rationale="`pattern` is exempt from the torch rules because it is only traced as the "
        "template; nothing may refer to it (name, import or attribute), so its exemption "
        "cannot be borrowed.",
        exploits=("pattern_borrowing",),
    ),
    Check(
        "replacement-args",
        "static",
        threat="computing in the argument selection, outside the guarded replacement",
        rationale="`replacement_args` is one `return` of its parameters, selected and "
        "reordered, plus literals (numbers, strings, `None`, dtypes, memory formats); it takes "
        "as many parameters as `pattern`, which receives the same matched inputs.",
        exploits=("replacement_args_compute",),
    ),
    Check(
        "replacement-func",
        "static",
        threat="a replacement built at load time rather than defined: a closure holding a "
        "cache between calls, a lambda, a raw Triton kernel",
        rationale="`replacement_func` takes no parameters and is one `return <name>` of a "
        "module-level function of the pass directory (the pass file's or a helper's) that is "
        "neither a `@triton.jit` kernel nor a pass function: what runs as the replacement is a "
        "function the other rules inspected as one, and nothing it closes over.",
        exploits=("closure_cache",),
    ),
    Check(
        "format",
        "static",
        threat="none: a malformed pass (`PassLoadError` when every finding is of this kind)",
        rationale="A pass file defines `pattern`, `replacement_args` and `replacement_func` "
        "once each, at module level, undecorated, with plain positional parameters; every "
        "manifest entry has its file; sources are UTF-8 and parse.",
        defense=False,
    ),
    Check(
        "file",
        "static",
        threat="native code the checker cannot read (`.so`, `.pyc`, inline CUDA built into "
        "one) and symbolic links out of the pass directory",
        rationale="No compiled code (`.so`, `.pyd`, `.pyc`, `.pyo`, `.dll`, `.dylib`, `.pth`, "
        "`.egg`, `.whl`) and no symbolic links in a pass directory: only source can be "
        "inspected, and only what was inspected may run (passes are Python + Triton).",
        exploits=("native_helper",),
    ),
    # -- dispatch: the runtime guard around every replacement call in a checked call
    Check(
        "dispatch",
        "dispatch",
        threat="computation that reaches ATen without naming torch: operators (`x + y`), "
        "builtins (`abs(x)`), mask indexing, element-by-element Python; tensor-subclass "
        "outputs",
        rationale="In every checked call each replacement runs under a `TorchDispatchMode` "
        "that lets through only creation, views and metadata, layout copies (`clone` with an "
        "explicit memory format) and reading one element of a one-element tensor "
        "(`ALLOWED_OPS`); any other ATen op raises `PassRejected` naming the op and the pass "
        "file and line that issued it, and is recorded, so the call is rejected even if the "
        "pass caught the exception. Outputs must be plain `torch.Tensor`s. ATen calls of "
        "Triton's own runtime are recognized by their caller, which pass code cannot be.",
        exploits=(
            "operator_delegation",
            "builtin_delegation",
            "indexing_delegation",
            "python_compute",
        ),
    ),
    # -- harness: what the evaluation child checks and arranges around the compiled calls
    Check(
        "input-mutation",
        "harness",
        threat="writing into inputs: computing in place to skip an allocation, or marking an "
        "input as seen (NaN, −0.0 over 0.0) to skip work on the next call",
        rationale="The compiled side and eager run on clones of the same inputs, and each "
        "clone is compared with the original afterwards bit for bit (`torch.equal` would miss "
        "NaN over NaN and −0.0 over 0.0); an input the compiled side changed and eager did not "
        "is a finding. The evaluation ends `pass_rejected` for a pass compiler "
        "(`runtime_error` for another compiler).",
        exploits=("input_mutation",),
    ),
    Check(
        "output-alias",
        "harness",
        threat="returning an input's storage where eager returns a fresh tensor (a skipped "
        "copy; a later in-place op would change the input)",
        rationale="An output that shares storage with an input, where eager's does not, is a "
        "finding. The evaluation ends `pass_rejected` for a pass compiler (`runtime_error` "
        "for another compiler).",
        exploits=("output_alias",),
    ),
    Check(
        "compiled-first",
        "harness",
        threat="an output never written that holds eager's result, left in freed memory",
        rationale="On each input draw the compiled side runs before eager, so eager's results "
        "are not in memory yet for an uninitialized allocation to pick up. " + _NOT_REJECTED,
        statuses=(Status.ACCURACY, Status.NONFINITE),
        exploits=("uninitialized_memory",),
    ),
    Check(
        "poisoned-allocator",
        "harness",
        threat="uninitialized memory that happens to hold a plausible result",
        rationale="On CUDA, before compiling, the child fills the memory the caching "
        "allocator hands out next with NaN, so an output no kernel wrote holds NaN. "
        + _NOT_REJECTED,
        statuses=(Status.ACCURACY, Status.NONFINITE),
        exploits=("uninitialized_memory",),
    ),
    Check(
        "fresh-draw",
        "harness",
        threat="outputs cached on one call and returned on a later one, by any channel the "
        "rules missed",
        rationale="After the first draw (and after timing) both sides run again on a second, "
        "independently drawn set of inputs, and both draws must be correct: a cache that is "
        "right for the first inputs is wrong for the second (first failing draw 2). "
        + _NOT_REJECTED
        + " Its exploit, which the static layer rejects first, is run as a trusted "
        "`const_pass_dir` to show the mechanism alone.",
        statuses=(Status.ACCURACY,),
        exploits=("draw_cache",),
    ),
    Check(
        "nonfinite-match",
        "harness",
        threat="NaN as a wildcard: returning NaN in the hope that it compares as equal",
        rationale="Non-finite values must sit exactly where eager has them, with the same "
        "value (NaN at NaN, +inf at +inf); anything else is `nonfinite` "
        "(`passnet.sample.compare_outputs`). " + _NOT_REJECTED,
        statuses=(Status.NONFINITE,),
        exploits=("nan_wildcard",),
    ),
    Check(
        "tolerance",
        "harness",
        threat="precision downgrade: computing a float32 graph in float16 (faster, less accurate)",
        rationale="Outputs must have eager's dtype and shape and be allclose at the baseline "
        "tolerance (t = −5, `passnet.sample.compare_outputs`): lower-precision math written "
        "back in the right dtype is `accuracy` (a lower-precision dtype returned as such is "
        "`dtype_mismatch` before any value is compared). " + _NOT_REJECTED,
        statuses=(Status.ACCURACY,),
        exploits=("precision_downgrade",),
    ),
)
"""Every integrity check, static rules first, then the dispatch guard, then the harness."""

_BY_NAME: dict[str, Check] = {c.name: c for c in CHECKS}
if len(_BY_NAME) != len(CHECKS):  # two entries of one name would make a rule ambiguous
    raise RegistryError("integrity check names are not unique")


def get_check(name: str) -> Check:
    """The check called ``name``; :class:`~passnet.errors.RegistryError` listing the known
    names when there is none (emitting an unregistered check is a programming error)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(_BY_NAME)
        raise RegistryError(
            f"unknown integrity check {name!r}; known checks: {known}", check=name
        ) from None
