"""Compiler registry: eager, inductor, inductor-max-autotune, cudagraphs, pass_mgr, plugins.

Third-party compilers register through the ``passnet.compilers`` entry-point group::

    [project.entry-points."passnet.compilers"]
    mycomp = "mypkg.backend:MyCompiler"   # a passnet.compilers.Compiler subclass
"""

from passnet.compilers import _builtin  # noqa: F401 - registers the built-in compilers
from passnet.compilers._base import COMPILERS, Compiler, create_compiler, register_compiler
from passnet.passes import _backend  # noqa: F401 - registers pass_mgr and pass_mgr+inductor

__all__ = ["COMPILERS", "Compiler", "create_compiler", "register_compiler"]
