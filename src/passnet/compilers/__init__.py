"""Compiler registry: eager, paddle-static, paddle-cinn, inductor, inductor-max-autotune, cudagraphs, inductor-scg (selective
CUDA graphs); pass_mgr and plugins.

Compilers outside this package register through the ``passnet.compilers`` entry-point
group, loaded on first lookup (passnet's own ``pass_mgr`` and ``pass_mgr+inductor``
arrive this way, from :mod:`passnet.passes`, so loading the registry loads no pass
machinery)::

    [project.entry-points."passnet.compilers"]
    mycomp = "mypkg.backend:MyCompiler"   # a passnet.compilers.Compiler subclass
"""

from passnet.compilers import (
    _builtin,  # noqa: F401 - registers the built-in compilers
    _paddle,  # noqa: F401 - registers paddle-static, paddle-cinn
)
from passnet.compilers._base import (
    COMPILERS,
    JSON_TYPES,
    Compiler,
    check_config_type,
    create_compiler,
    json_type,
    json_type_fits,
    register_compiler,
)
from passnet.compilers._builtin import (
    DEFAULT_DYNAMIC,
    GRAPHNET_DYNAMO_OPTIONS,
    compile_warm,
    dynamo_option_types,
    inductor_option_types,
    stop_compile_workers,
)
from passnet.compilers._cudagraph import (
    GraphedCall,
    PartitionChoices,
    PerShape,
    capture_graph,
    has_symbolic_sizes,
    is_module_state,
    mark_module_state,
    select_cudagraph,
    split_reason,
)
from passnet.compilers._info import CompilerInfo, compiler_info, is_code_spec

__all__ = [
    "DEFAULT_DYNAMIC",
    "GRAPHNET_DYNAMO_OPTIONS",
    "COMPILERS",
    "JSON_TYPES",
    "GraphedCall",
    "Compiler",
    "CompilerInfo",
    "PartitionChoices",
    "PerShape",
    "has_symbolic_sizes",
    "capture_graph",
    "is_code_spec",
    "is_module_state",
    "mark_module_state",
    "check_config_type",
    "compile_warm",
    "compiler_info",
    "create_compiler",
    "dynamo_option_types",
    "inductor_option_types",
    "json_type",
    "json_type_fits",
    "register_compiler",
    "select_cudagraph",
    "split_reason",
    "stop_compile_workers",
]
