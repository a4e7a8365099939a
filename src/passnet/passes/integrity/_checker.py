"""The AST checks of the static layer: one pass over each file, findings out.

The rules are the static entries of :data:`passnet.passes.integrity._checks.CHECKS`
(what each refuses and why; a finding of an unregistered rule cannot be made), their
tables are in :mod:`passnet.passes.integrity._rules`; module-level facts of every file
come from :mod:`passnet.passes.integrity._symbols` first, so the checks can
follow names across the pass directory (``from pass_dir.helper import fused``).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Sequence

from passnet.passes.integrity._rules import (
    FORBIDDEN_BUILTINS,
    IMPORTABLE,
    INFO_ATTRS,
    JIT_VALUE_ATTRS,
    MODULE_LEVEL_CALLS,
    PACKAGE,
    PASS_FUNCTIONS,
    TORCH_DTYPES,
    VALUE_ATTRS,
    Finding,
    allowed,
    is_dunder,
    names_a_module,
    pattern_torch_problem,
)
from passnet.passes.integrity._symbols import (
    ModuleFacts,
    Report,
    attr_chain,
    collect,
    is_jit_decorator,
    parse,
)
from passnet.task import MANIFEST_FILE

__all__ = ["check_sources"]

_BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))


class _Scope:
    def __init__(self, kind: str, local_names: set[str]) -> None:
        self.kind = kind  # module | function | pattern | jit
        self.locals = local_names


def _local_names(fn: ast.FunctionDef | ast.Lambda) -> set[str]:
    args = fn.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    if args.vararg:
        names.add(args.vararg.arg)
    if args.kwarg:
        names.add(args.kwarg.arg)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not fn:
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _body_without_docstring(node: ast.FunctionDef) -> list[ast.stmt]:
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


def _single_return(body: list[ast.stmt]) -> bool:
    """The body is one ``return <value>``."""
    return len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None


class _Checker(ast.NodeVisitor):
    """Walks one file and reports every rule violation."""

    def __init__(self, mod: ModuleFacts, modules: dict[str, ModuleFacts], report: Report) -> None:
        self.mod = mod
        self.modules = modules
        self.report = report
        self.scopes: list[_Scope] = [_Scope("module", set())]
        self.parents: dict[ast.AST, ast.AST] = {
            child: parent for parent in ast.walk(mod.tree) for child in ast.iter_child_nodes(parent)
        }

    # -- helpers -----------------------------------------------------------
    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.report.add(self.mod, self.mod.file, node, rule, message)

    @property
    def scope(self) -> _Scope:
        return self.scopes[-1]

    @property
    def in_pattern(self) -> bool:
        return any(s.kind == "pattern" for s in self.scopes)

    @property
    def in_jit(self) -> bool:
        return any(s.kind == "jit" for s in self.scopes)

    def is_local(self, name: str) -> bool:
        return any(name in s.locals for s in self.scopes[1:])

    def qualname(self, name: str) -> str | None:
        if self.is_local(name):
            return None
        return self.mod.aliases.get(name)

    # -- module level ------------------------------------------------------
    def check_module(self) -> None:
        for stmt in self.mod.tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(stmt, ast.FunctionDef):
                self.visit(stmt)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                value = stmt.value
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if not all(
                        isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store, ast.Load))
                        for n in ast.walk(target)
                    ):
                        self.add(stmt, "state", "module-level assignments may only bind names")
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name) and n.id in self.mod.aliases:
                            self.add(
                                n, "import", f"rebinding the imported name {n.id!r} is not allowed"
                            )
                if value is not None:
                    if not self._module_value_ok(value):
                        self.add(
                            value,
                            "state",
                            "a module-level value must be immutable (constants, tuples of "
                            "them), a table (list/set/dict) of immutable values, or a "
                            "triton.Config/math call: a container inside it could keep state "
                            "between calls",
                        )
                    self.visit(value)
                if isinstance(stmt, ast.AnnAssign):
                    self._check_annotation(stmt.annotation)
            elif (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                continue
            elif isinstance(stmt, ast.Expr) and self._is_fx_wrap_call(stmt.value):
                continue
            elif isinstance(stmt, ast.ClassDef):
                self.visit(stmt)
            elif isinstance(stmt, ast.AsyncFunctionDef):
                self.visit(stmt)
            else:
                self.add(
                    stmt,
                    "module",
                    f"{type(stmt).__name__} statement at module level is not allowed "
                    "(only imports, function definitions, constants and docstrings)",
                )
                self.visit(stmt)

    def _is_fx_wrap_call(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Call):
            return False
        chain = attr_chain(node.func)
        if chain is None or chain[0] not in self.mod.aliases:
            return False
        return ".".join([self.mod.aliases[chain[0]], *chain[1]]) == "torch.fx.wrap" and all(
            isinstance(a, ast.Constant) for a in node.args
        )

    def _immutable(self, node: ast.expr) -> bool:
        """A value no code can change: constants, tuples of them, names of constants,
        functions and imports, attribute chains (``torch.float16``), arithmetic of these."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Tuple):
            return all(self._immutable(e) for e in node.elts)
        if isinstance(node, ast.Name):
            return (
                node.id in self.mod.constants
                or node.id in self.mod.functions
                or (node.id in self.mod.aliases or node.id in ("True", "False", "None"))
            )
        if isinstance(node, ast.Attribute):
            return attr_chain(node) is not None
        if isinstance(node, ast.UnaryOp):
            return self._immutable(node.operand)
        if isinstance(node, ast.BinOp):
            return self._immutable(node.left) and self._immutable(node.right)
        return False

    def _module_value_ok(self, node: ast.expr) -> bool:
        """A module-level value: immutable, or a table (list/set/dict) of immutable values
        (a container inside a tuple or a table could carry state from call to call), or a
        triton.Config/math call."""
        if isinstance(node, (ast.List, ast.Set)):
            return all(self._immutable(e) or self._allowed_call(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(k is not None and self._immutable(k) for k in node.keys) and all(
                self._immutable(v) or self._allowed_call(v) for v in node.values
            )
        if isinstance(node, ast.Lambda):
            return True
        if isinstance(node, ast.Call):
            return self._allowed_call(node)
        return self._immutable(node)

    def _allowed_call(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Call):
            return False
        chain = attr_chain(node.func)
        if chain is None or chain[0] not in self.mod.aliases:
            return False
        qual = ".".join([self.mod.aliases[chain[0]], *chain[1]])
        if qual not in MODULE_LEVEL_CALLS and not qual.startswith("math."):
            return False
        return all(self._call_argument_ok(a) for a in node.args) and all(
            self._call_argument_ok(k.value) for k in node.keywords
        )

    def _call_argument_ok(self, node: ast.expr) -> bool:
        # triton.Config({"BLOCK": 64}, num_warps=4): a dict of constants is copied into it
        if isinstance(node, ast.Dict):
            return all(k is not None and self._immutable(k) for k in node.keys) and all(
                self._immutable(v) for v in node.values
            )
        return self._immutable(node) or self._allowed_call(node)

    # -- definitions -------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        module_level = len(self.scopes) == 1
        special = module_level and self.mod.is_pass and node.name in PASS_FUNCTIONS
        for dec in node.decorator_list:
            if special:
                self.add(dec, "format", f"{node.name} must not be decorated")
            self.visit(dec)
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is None:
                continue
            if not self._immutable(default):
                self.add(
                    default,
                    "state",
                    f"default argument `{ast.unparse(default)}` of {node.name}() is not an "
                    "immutable value: it could keep state between calls",
                )
            self.visit(default)
        self._check_annotations(node)
        if special and node.name == "replacement_args":
            self._check_replacement_args(node)
            return
        if special and node.name == "replacement_func":
            self._check_replacement_func(node)
            return
        if special and node.name == "pattern":
            self._check_signature(node)
            kind = "pattern"
        elif any(is_jit_decorator(self.mod, d) for d in node.decorator_list):
            kind = "jit"
        else:
            kind = "function"
        self.scopes.append(_Scope(kind, _local_names(node)))
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.add(node, "async", "coroutines are not allowed")

    def _check_annotations(self, node: ast.FunctionDef) -> None:
        args = node.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        annotations = [a.annotation for a in every if a is not None and a.annotation is not None]
        if node.returns is not None:
            annotations.append(node.returns)
        for annotation in annotations:
            self._check_annotation(annotation)

    def _check_annotation(self, annotation: ast.expr) -> None:
        for n in ast.walk(annotation):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                self.add(
                    n,
                    "annotation",
                    "string annotations are not allowed: they can be evaluated as code",
                )
                return
        self.visit(annotation)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if default is not None:
                if not self._immutable(default):
                    self.add(
                        default,
                        "state",
                        f"default argument `{ast.unparse(default)}` of a lambda is not an "
                        "immutable value: it could keep state between calls",
                    )
                self.visit(default)
        self.scopes.append(_Scope("function", _local_names(node)))
        self.visit(node.body)
        self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.add(
            node,
            "class",
            f"class {node.name}: class definitions are not allowed in pass code "
            "(tensor subclasses, descriptors and operator overloading)",
        )

    def _check_signature(self, node: ast.FunctionDef) -> None:
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            self.add(
                node,
                "format",
                f"{node.name} must take plain positional parameters (no defaults, *args, **kwargs)",
            )

    def _check_replacement_args(self, node: ast.FunctionDef) -> None:
        self._check_signature(node)
        params = [a.arg for a in node.args.args]
        pattern = self.mod.functions.get("pattern")
        if pattern is not None and len(pattern.args.args) != len(params):
            self.add(
                node,
                "replacement-args",
                f"replacement_args takes {len(params)} parameters, "
                f"pattern takes {len(pattern.args.args)}: they receive the same matched inputs",
            )
        body = _body_without_docstring(node)
        if not _single_return(body):
            self.add(
                node,
                "replacement-args",
                "replacement_args must consist of a single return statement "
                "that selects/reorders its parameters and adds literals",
            )
            return
        value = body[0].value
        elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        for element in elements:
            if not self._selection_ok(element, set(params)):
                self.add(
                    element,
                    "replacement-args",
                    f"replacement_args may only select/reorder its parameters "
                    f"and add literals; `{ast.unparse(element)}` computes something",
                )

    def _selection_ok(self, node: ast.expr, params: set[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in params or node.id in ("True", "False", "None")
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return isinstance(node.operand, ast.Constant)
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self._selection_ok(e, set()) for e in node.elts)  # literals only, nested
        chain = attr_chain(node) if isinstance(node, ast.Attribute) else None
        if chain is not None and chain[0] in self.mod.aliases:
            qual = ".".join([self.mod.aliases[chain[0]], *chain[1]])
            return qual in TORCH_DTYPES or qual in {
                "torch.contiguous_format",
                "torch.channels_last",
                "torch.channels_last_3d",
                "torch.preserve_format",
            }
        return False

    def _check_replacement_func(self, node: ast.FunctionDef) -> None:
        if node.args.args or node.args.vararg or node.args.kwarg or node.args.kwonlyargs:
            self.add(node, "format", "replacement_func takes no parameters")
        body = _body_without_docstring(node)
        if not _single_return(body):
            self.add(
                node,
                "replacement-func",
                "replacement_func must be a single `return <function name>` "
                "of a module-level function (no lambda, no nested def)",
            )
            return
        value = body[0].value
        problem = self._replacement_target_problem(value)
        if problem:
            self.add(value, "replacement-func", problem)

    def _replacement_target_problem(self, value: ast.expr) -> str | None:
        expected = (
            "replacement_func must return a module-level function of the pass directory by name"
        )
        if isinstance(value, ast.Name):
            name = value.id
            if name in PASS_FUNCTIONS:
                return f"replacement_func must not return {name}"
            if name in self.mod.functions:
                if name in self.mod.jit_functions:
                    return f"{name} is a @triton.jit kernel; return the Python wrapper that launches it"
                return None
            qual = self.mod.aliases.get(name)
            if qual and qual.startswith(PACKAGE + ".") and qual.count(".") == 2:
                return self._helper_function_problem(qual)
            return f"{expected}; {name!r} is not defined at module level here"
        chain = attr_chain(value) if isinstance(value, ast.Attribute) else None
        if chain is not None and len(chain[1]) == 1 and chain[0] in self.mod.aliases:
            qual = f"{self.mod.aliases[chain[0]]}.{chain[1][0]}"
            if qual.startswith(PACKAGE + ".") and qual.count(".") == 2:
                return self._helper_function_problem(qual)
        return f"{expected}, not `{ast.unparse(value)}` (no lambda, no call, no nested def)"

    def _helper_function_problem(self, qual: str) -> str | None:
        _, module, name = qual.split(".")
        helper = self.modules.get(f"{module}.py")
        if helper is None:
            return f"{PACKAGE}.{module} does not exist"
        if name not in helper.functions:
            return f"{qual} is not a module-level function of {module}.py"
        if name in helper.jit_functions:
            return f"{qual} is a @triton.jit kernel; return the Python wrapper that launches it"
        if name in PASS_FUNCTIONS:
            return f"replacement_func must not return {qual}"
        return None

    # -- statements --------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        self.add(node, "import", "imports are allowed at module level only")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.add(node, "import", "imports are allowed at module level only")

    def visit_Global(self, node: ast.Global) -> None:
        self.add(
            node,
            "state",
            f"`global {', '.join(node.names)}`: module state could cache outputs between calls",
        )

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.add(node, "state", f"`nonlocal {', '.join(node.names)}` is not allowed")

    def visit_Try(self, node: ast.AST) -> None:
        self.add(
            node,
            "try",
            "try/except is not allowed: a pass must not catch the runtime guard's rejection",
        )
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Await(self, node: ast.Await) -> None:
        self.add(node, "async", "await is not allowed")

    def visit_AsyncFor(self, node: ast.AsyncFor) -> None:
        self.add(node, "async", "async for is not allowed")

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        self.add(node, "async", "async with is not allowed")

    def _check_store_target(self, target: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self._check_store_target(e)
        elif isinstance(target, ast.Starred):
            self._check_store_target(target.value)
        elif isinstance(target, ast.Subscript) and not self.in_pattern and not self.in_jit:
            base: ast.expr = target
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if not (isinstance(base, ast.Name) and self.is_local(base.id)):
                self.add(
                    target,
                    "state",
                    f"assigns into `{ast.unparse(target)}`: only local variables may be modified",
                )

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_store_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_store_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_store_target(node.target)
        self._check_annotation(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._check_store_target(target)
        self.generic_visit(node)

    # -- expressions -------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.add(
                node,
                "state",
                f"attribute assignment `{ast.unparse(node)}` is not allowed (patching, caching)",
            )
        if is_dunder(node.attr):
            self.add(node, "dunder", f"dunder attribute `.{node.attr}` is not allowed")
            return
        chain = attr_chain(node)
        if chain is not None:
            qual = self.qualname(chain[0])
            if qual is not None:
                self._check_module_chain(node, qual.split(".") + chain[1], chain[1])
                return
        if node.attr == "pattern":
            self.add(node, "pattern-ref", "pattern may not be referred to: it is only the template")
        elif self.in_jit and node.attr not in JIT_VALUE_ATTRS:
            self.add(
                node,
                "jit-attr",
                f"`.{node.attr}` is not an attribute of Triton's tensors, dtypes or constexprs: "
                "in a kernel a value may only be used through those",
            )
        elif not (self.in_pattern or self.in_jit) and node.attr not in VALUE_ATTRS:
            if not (node.attr in INFO_ATTRS and self._is_info_call(node.value)):
                self.add(
                    node,
                    "tensor-method",
                    f"`.{node.attr}` is not allowed outside pattern: replacement code "
                    "may read tensor metadata and create or view tensors, the computation belongs in a kernel",
                )
        self.visit(node.value)

    def _is_info_call(self, node: ast.expr) -> bool:
        if not isinstance(node, ast.Call):
            return False
        chain = attr_chain(node.func)
        if chain is None:
            return False
        qual = self.qualname(chain[0])
        return qual is not None and ".".join([qual, *chain[1]]) in ("torch.finfo", "torch.iinfo")

    def _check_module_chain(self, node: ast.Attribute, parts: list[str], attrs: list[str]) -> None:
        in_pattern = self.in_pattern
        if parts[0] == PACKAGE:
            self._check_package_chain(node, parts)
            return
        for cut in range(len(parts), 0, -1):
            qual = ".".join(parts[:cut])
            if allowed(qual, in_pattern):
                rest = parts[cut:]
                if rest and names_a_module(qual):
                    # `tl.core.builtins`, `typing.sys`: the longer names were refused, and a
                    # module may only be used as `module.<allowed name>`, in kernels too
                    self.add(
                        node,
                        "torch-api" if parts[0] in ("torch", "triton") else "import",
                        f"`{'.'.join(parts)}` is not allowed: `{qual}.{rest[0]}` is not an "
                        f"allowed name of `{qual}`",
                    )
                    return
                for k, attr in enumerate(rest, start=cut + 1):
                    if is_dunder(attr):
                        self.add(node, "dunder", f"dunder attribute `.{attr}` is not allowed")
                    elif (in_pattern or self.in_jit) and (
                        attr.startswith("_") or names_a_module(".".join(parts[:k]))
                    ):
                        # where value attributes are otherwise free, none may be private or
                        # lead into a module (an object holding, say, `os` as an attribute)
                        self.add(
                            node,
                            "torch-api" if parts[0] in ("torch", "triton") else "import",
                            f"`{'.'.join(parts[:k])}` is not allowed: private or a module",
                        )
                        return
                    elif attr == "pattern":
                        self.add(
                            node,
                            "pattern-ref",
                            "pattern may not be referred to: it is only the template",
                        )
                    elif (
                        not (in_pattern or self.in_jit)
                        and attr not in VALUE_ATTRS
                        and attr not in INFO_ATTRS
                    ):
                        self.add(
                            node,
                            "tensor-method",
                            f"`{'.'.join(parts)}`: `.{attr}` is not allowed outside pattern",
                        )
                return
        qual = ".".join(parts)
        root = parts[0]
        if in_pattern:
            reason = (
                pattern_torch_problem(qual)
                if root == "torch"
                else "not even in pattern (tracing the pattern executes it)"
            )
            self.add(node, "torch-api", f"`{qual}` is not allowed in pattern: {reason}")
        elif root == "torch":
            self.add(
                node,
                "torch-api",
                f"`{qual}` is not allowed outside pattern: torch may only create tensors "
                "and read metadata in pass code; the computation belongs in a kernel",
            )
        else:
            self.add(
                node, "torch-api" if root == "triton" else "import", f"`{qual}` is not allowed"
            )

    def _package_name_problem(self, parts: list[str]) -> tuple[str, str] | None:
        """(rule, message) when ``pass_dir.<helper>.<name>`` is not one of the helper's own
        functions or constants: what a helper imports is not reachable through it."""
        if len(parts) < 3:
            return None
        helper = self.modules.get(f"{parts[1]}.py")
        if helper is None:
            return "import", f"{PACKAGE}.{parts[1]} does not exist"
        name = parts[2]
        if name == "pattern":
            return "pattern-ref", "pattern may not be referred to: it is only the template"
        if is_dunder(name):
            return "dunder", f"dunder attribute `.{name}` is not allowed"
        if not (name in helper.functions or name in helper.constants or name in helper.containers):
            return "import", (
                f"`{PACKAGE}.{parts[1]}.{name}` is not a function or constant defined in "
                f"{parts[1]}.py: names it imports are not reachable through it (import them here)"
            )
        return None

    def _check_package_chain(self, node: ast.Attribute, parts: list[str]) -> None:
        problem = self._package_name_problem(parts)
        if problem is not None:
            self.add(node, *problem)
            return
        if len(parts) < 3:
            return
        helper = self.modules[f"{parts[1]}.py"]
        rest = parts[3:]
        if rest and parts[2] in helper.containers:
            self.add(
                node,
                "state",
                f"`{'.'.join(parts)}`: a module-level table of {parts[1]}.py may only be read",
            )
            return
        # what follows the helper's name are attributes of a value: the usual value rules,
        # the first attribute that breaks one is reported
        for attr in rest:
            problem = self._value_attribute_problem(attr)
            if problem is not None:
                rule, why = problem
                self.add(node, rule, f"`{'.'.join(parts)}`: `.{attr}` {why}")
                return

    def _value_attribute_problem(self, attr: str) -> tuple[str, str] | None:
        if is_dunder(attr):
            return "dunder", "is a dunder attribute"
        if self.in_jit and attr not in JIT_VALUE_ATTRS:
            return "jit-attr", "is not an attribute of Triton's tensors, dtypes or constexprs"
        if not (self.in_pattern or self.in_jit) and attr not in VALUE_ATTRS | INFO_ATTRS:
            return "tensor-method", "is not allowed outside pattern"
        return None

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if is_dunder(name):
            self.add(node, "dunder", f"dunder name `{name}` is not allowed")
            return
        if not isinstance(node.ctx, ast.Load):
            return
        local = self.is_local(name)
        if local:
            return
        if (
            name in FORBIDDEN_BUILTINS
            and name not in self.mod.functions
            and name not in self.mod.aliases
        ):
            self.add(node, "builtin", f"builtin `{name}` is not allowed in pass code")
            return
        if name == "type" and not self._is_one_arg_call(node):
            self.add(
                node, "builtin", "`type` may only be called with one argument (no dynamic classes)"
            )
            return
        if name == "pattern":
            self.add(node, "pattern-ref", "pattern may not be referred to: it is only the template")
            return
        qual = self.mod.aliases.get(name)
        if qual is not None:
            is_package = qual == PACKAGE or (
                qual.startswith(PACKAGE + ".") and qual.count(".") == 1
            )
            if qual.startswith(PACKAGE + ".") and not is_package:
                problem = self._package_name_problem(qual.split("."))
                if problem is not None:
                    self.add(node, *problem)
                return
            if not is_package and not allowed(qual, self.in_pattern):
                rule = "torch-api" if qual.startswith("torch") else "import"
                if qual in IMPORTABLE or qual == name:
                    message = f"module `{name}` may only be used as `{name}.<allowed name>`, not as a value"
                else:
                    message = f"`{name}` ({qual}) is not allowed" + (
                        "" if self.in_pattern else " outside pattern"
                    )
                self.add(node, rule, message)
            return
        if not (
            name in self.mod.functions
            or name in self.mod.constants
            or name in self.mod.containers
            or name in _BUILTIN_NAMES
        ):
            # Not bound here: under TRITON_INTERPRET=1 Triton puts its own module globals
            # (inspect, np, ...) into a kernel's module, where such a name would find them.
            self.add(node, "name", f"`{name}` is not defined in this file")
            return
        if name in self.mod.containers and len(self.scopes) > 1 and not self._read_only_use(node):
            self.add(
                node,
                "state",
                f"module-level table `{name}` may only be read (T[k], k in T, for k in T, len(T)) "
                "inside functions: module state could cache outputs between calls",
            )

    def _is_one_arg_call(self, node: ast.Name) -> bool:
        parent = self.parents.get(node)
        return (
            isinstance(parent, ast.Call)
            and parent.func is node
            and len(parent.args) == 1
            and not parent.keywords
        )

    def _read_only_use(self, node: ast.Name) -> bool:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return isinstance(parent.ctx, ast.Load)
        if isinstance(parent, ast.Compare) and node in parent.comparators:
            return all(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops)
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is node:
            return True
        if (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id == "len"
        ):
            return parent.args == [node]
        return False


def check_sources(sources: dict[str, str], pass_names: Sequence[str]) -> list[Finding]:
    """Check pass sources (file name relative to the pass directory → text).

    ``pass_names`` are the manifest entries: ``<name>.py`` must define the three
    pass functions; every other file is a helper. Returns all findings, ordered
    by file and line; an empty list means the sources pass the static layer.
    """
    report = Report()
    pass_files = {f"{n}.py" for n in pass_names}
    modules: dict[str, ModuleFacts] = {}
    for file in sorted(sources):
        mod = parse(file, sources[file], file in pass_files, report)
        if mod is not None:
            modules[file] = mod
    top_level = {f for f in sources if "/" not in f}
    for mod in modules.values():
        collect(mod, top_level, report)
    for file, mod in modules.items():
        if mod.is_pass:
            for required in PASS_FUNCTIONS:
                if required not in mod.functions:
                    report.add(
                        mod,
                        file,
                        None,
                        "format",
                        f"pass file must define {required}() at module level",
                    )
            names = [s.name for s in mod.tree.body if isinstance(s, ast.FunctionDef)]
            for required in PASS_FUNCTIONS:
                if names.count(required) > 1:
                    report.add(
                        mod,
                        file,
                        mod.functions[required],
                        "format",
                        f"{required} is defined more than once",
                    )
        _Checker(mod, modules, report).check_module()
    for name in pass_names:
        if f"{name}.py" not in sources:
            report.findings.append(
                Finding(MANIFEST_FILE, 1, 1, "format", f"pass {name!r} has no file {name}.py")
            )
    return sorted(report.findings, key=lambda f: (f.file, f.line, f.col, f.rule))
