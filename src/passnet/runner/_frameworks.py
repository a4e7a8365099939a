"""One framework per run: torch samples and Paddle samples are not mixed, and the compiler
must compile the framework the samples are in (docs/paddle.md)."""

from __future__ import annotations

from collections.abc import Callable

from passnet.errors import CompilerError, DeviceUnavailable, InputFormatError
from passnet.evaluate import PaddleProbe, check_compiler, probe_paddle
from passnet.runner._plan import WorkItem
from passnet.sample import PADDLE, paddle_missing, sample_framework

__all__ = ["check_frameworks"]


def check_frameworks(
    items: list[WorkItem],
    compiler: str,
    device: str = "cpu",
    probe: Callable[[], PaddleProbe] = probe_paddle,
) -> str | None:
    """The framework of ``items`` (``"torch"``, ``"paddle"``; None for no items), or an error
    before anything runs: a :class:`~passnet.errors.InputFormatError` when the PATHs mix
    torch and Paddle samples (scores over both would mix two frameworks' eager baselines),
    a :class:`~passnet.errors.CompilerError` when ``compiler`` does not compile that
    framework, :class:`~passnet.errors.DeviceUnavailable` for ``paddle-cinn`` where the
    installed Paddle has no CINN, or for a CUDA ``device`` where it is a CPU build
    (``probe`` asks an isolated child: the parent never imports Paddle). Without Paddle installed, Paddle samples are not refused here: each
    gets a ``sample_error`` record that says what to install."""
    from passnet.compilers import COMPILERS

    found: dict[str, list[WorkItem]] = {}
    for item in items:
        found.setdefault(sample_framework(item.path), []).append(item)
    if not found:
        return None
    if len(found) > 1:
        parts = "; ".join(
            f"{len(group)} {name} (e.g. {group[0].label})" for name, group in sorted(found.items())
        )
        raise InputFormatError(
            f"the PATHs hold samples of two frameworks: {parts}; evaluate each framework "
            "in a run of its own (with its own --out)"
        )
    framework = next(iter(found))
    # a code spec is described by an isolated child (check_compiler): never imported here
    info = check_compiler(compiler, check_config=False)
    if framework not in info.frameworks:
        able = sorted(n for n in COMPILERS.names() if framework in COMPILERS.get(n).frameworks)
        raise CompilerError(
            f"compiler {compiler!r} compiles {', '.join(info.frameworks)} graphs, and "
            f"these are {framework} samples; compilers of {framework} samples: {', '.join(able)}",
            compiler=compiler,
        )
    needs_cinn = info.needs_cinn
    cuda = device.startswith("cuda")
    if framework == PADDLE and (needs_cinn or cuda) and paddle_missing() is None:
        found_paddle = probe()
        if found_paddle.installed and cuda and not found_paddle.cuda:
            raise DeviceUnavailable(
                f"--device {device}, and this Paddle ({found_paddle.version}) is a CPU build "
                "(paddle.device.is_compiled_with_cuda() is False): install a CUDA build of "
                "paddlepaddle-gpu (docs/paddle.md)",
                device=device,
            )
        if found_paddle.installed and needs_cinn and not found_paddle.cinn:
            raise DeviceUnavailable(
                f"compiler {compiler!r} needs a Paddle built with CINN, and this one "
                f"({found_paddle.version}) is not (paddle.device.is_compiled_with_cinn() is "
                "False); use paddle-static, or a Paddle build with CINN (docs/paddle.md)",
                compiler=compiler,
            )
    return framework
