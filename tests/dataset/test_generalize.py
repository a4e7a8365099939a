"""Generalization: dtype and shape variants, literal rewriting, validation by running."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from passnet.dataset import decompose_sample
from passnet.dataset._generalize import (
    Variant,
    VariantStatus,
    generalize_sample,
    generalize_samples,
    infer_symbolic_dims,
    plan_variants,
    read_generalize_manifest,
)
from passnet.dataset._shapes import GeneralizeError, _new_expand_sizes, _new_index, _new_view_sizes
from passnet.dataset._subgraph import copy_parent_graph, render_model_source, trace_parent
from passnet.dataset._variants import (
    cast_sample,
    dtype_candidates,
    half_convolutions_in_float32,
    normalization_parameters,
    write_first_runnable,
)
from passnet.errors import SampleError
from passnet.sample import TensorMeta, load_sample, write_sample
from tests.conftest import BERT, DEV

BASELINE3D = DEV / "mmpose" / "SimpleBaseline3D"
VIT = DEV / "transformers-auto-model" / "nateraw_tiny-vit-random"


def written(result) -> dict[str, Path]:
    return {v.name: Path(v.path) for v in result.variants if v.status is VariantStatus.WRITTEN}


def run(path: Path) -> tuple[torch.Tensor, ...]:
    sample = load_sample(path)
    with torch.no_grad():
        return sample.build_module("cpu")(*sample.replay_inputs("cpu", seed=3))


def test_view_sizes_follow_the_dimension_that_changed() -> None:
    scale = {1: 2, 11: 22}
    assert _new_view_sizes([1, -1, 2, 64], [1, 11, 128], [2, 11, 128], scale) == [2, -1, 2, 64]
    assert _new_view_sizes([11, 128], [1, 11, 128], [1, 22, 128], scale) == [22, 128]
    assert _new_view_sizes([1, 11, 2, 64], [1, 11, 128], [1, 22, 128], scale) == [1, 22, 2, 64]
    with pytest.raises(GeneralizeError, match="which of the sizes"):
        _new_view_sizes([4, 4], [16], [64], {})


def test_a_flattened_square_grid_viewed_back_follows_its_symbol_on_both_sides() -> None:
    # S x S tokens viewed as (S, S): both sizes are the symbol's value
    assert _new_view_sizes([1, 3, 4, 4], [1, 3, 16], [1, 3, 64], {4: 8}) == [1, 3, 8, 8]
    # CoaT: a 224 x 224 image, a stride-4 patch embedding, 3136 tokens viewed as 56 x 56
    assert _new_view_sizes([1, 152, 56, 56], [1, 152, 3136], [1, 152, 12544], {224: 448}) == [
        1,
        152,
        112,
        112,
    ]
    with pytest.raises(GeneralizeError, match="which of the sizes"):  # 2 x 8: no square
        _new_view_sizes([1, 3, 2, 8], [1, 3, 16], [1, 3, 64], {4: 8})


def test_expand_and_slices_follow_their_input() -> None:
    assert _new_expand_sizes([1, 1, 11, 11], [1, 1, 1, 11], [2, 1, 1, 22], {1: 2, 11: 22}) == [
        2,
        1,
        22,
        22,
    ]
    assert _new_expand_sizes([1, 1, 11, 11], [1, 1, 1, 11], [1, 1, 1, 22], {11: 22}) == [
        1,
        1,
        22,
        22,
    ]
    index = (slice(None, None, None), slice(0, 11, None))
    assert _new_index(index, [1, 512], [1, 512], {11: 22}) == (slice(None), slice(0, 22))
    assert _new_index((slice(0, 7),), [7, 3], [14, 3], {}) == (slice(0, 14),)


def test_plan_crosses_dtypes_with_scaled_symbols() -> None:
    plan = plan_variants({"S0": 1, "S1": 11}, ["float16", "bfloat16"], [2])
    names = [v.name for v in plan]
    assert names == [
        "float16",
        "bfloat16",
        "float32_S0-2",
        "float16_S0-2",
        "bfloat16_S0-2",
        "float32_S1-22",
        "float16_S1-22",
        "bfloat16_S1-22",
    ]
    assert Variant(torch.float16, (("S1", 22),)).name == "float16_S1-22"
    with pytest.raises(ValueError, match="unknown dtype"):
        plan_variants({}, ["int8"], [])


def test_bert_dtype_and_shape_variants_run_with_rewritten_literals(tmp_path: Path) -> None:
    result = generalize_sample(BERT, tmp_path, shape_factors=[2], cross=False)
    assert result.status == "ok" and result.symbols == {"S0": 1, "S1": 11}
    paths = written(result)
    assert set(paths) == {"float16", "bfloat16", "float32_S0-2", "float32_S1-22"}
    half = paths["float16"] / "model.py"
    source = half.read_text()
    assert (
        "torch.float32" not in source and "-65504.0" in source
    )  # finfo(float32).min follows the dtype
    metas = load_sample(paths["float16"]).metas
    assert metas["L_input_ids_"].dtype == torch.int64  # integer tensors keep their dtype
    assert metas["L_self_modules_pooler_modules_dense_parameters_weight_"].dtype == torch.float16
    longer = (paths["float32_S1-22"] / "model.py").read_text()
    assert "expand(1, 1, 22, 22)" in longer and "slice(0, 22, None)" in longer
    assert load_sample(paths["float32_S1-22"]).metas["L_input_ids_"].shape == [1, 22]
    for path in paths.values():
        outputs = run(path)
        assert all(torch.isfinite(o).all() for o in outputs if o.is_floating_point())
    assert run(paths["float32_S0-2"])[0].shape[0] == 2
    gn = load_sample(paths["bfloat16"]).graph_net["generalization"]
    assert gn["dtype"] == "bfloat16" and gn["parent"] == BERT.name  # relative to its folder


def test_batch_norm_statistics_stay_float32(tmp_path: Path) -> None:
    result = generalize_sample(BASELINE3D, tmp_path, dtypes=["float16"], shape_factors=[])
    metas = load_sample(written(result)["float16"]).metas
    stats = [m for n, m in metas.items() if "running_mean" in n or "running_var" in n]
    assert stats and all(m.dtype == torch.float32 for m in stats)
    convs = [m for n, m in metas.items() if n.endswith("conv_parameters_weight_")]
    assert convs and all(m.dtype == torch.float16 for m in convs)
    protected = load_sample(written(result)["float16"]).graph_net["generalization"][
        "protected_float32"
    ]
    assert {m.name for m in stats} <= set(protected)
    assert all(metas[n].dtype == torch.float32 for n in protected)  # affine parameters too


def test_generalize_and_cast_sample_make_the_same_dtype_variant(tmp_path: Path) -> None:
    # One implementation: the generalize stage's variant is cast_sample's with literals rewritten.
    result = generalize_sample(BERT, tmp_path / "g", dtypes=["float16"], shape_factors=[])
    generalized = load_sample(written(result)["float16"])
    cast = load_sample(cast_sample(BERT, tmp_path / "c", torch.float16, literals="always"))
    assert generalized.model_source == cast.model_source
    assert {n: m.dtype for n, m in generalized.metas.items()} == {
        n: m.dtype for n, m in cast.metas.items()
    }
    assert cast.graph_net["dtype_literals_rewritten"] == "torch.float16"
    # Each caller keeps its own provenance and hash.
    assert (
        generalized.graph_net["generalization"]["parent_graph_hash"]
        == (cast.graph_net["dtype_generalization"]["source_graph_hash"])
    )
    assert generalized.graph_hash != cast.graph_hash


def _baseline3d_candidates(literals: str = "never"):
    sample = load_sample(BASELINE3D)
    graph, _ = copy_parent_graph(trace_parent(sample))
    names = list(sample.param_names)
    annotations = [dict(sample.params)[n] or "torch.Tensor" for n in names]
    stats, affine = normalization_parameters(graph)
    candidates = dtype_candidates(
        graph,
        [*sample.weight_metas, *sample.input_metas],
        torch.float16,
        render=lambda g: render_model_source(g, names, annotations),
        traced_source=sample.model_source,
        literals=literals,
    )
    return candidates, stats, affine


def test_a_variant_falls_back_to_keeping_only_the_normalization_statistics(
    tmp_path: Path,
) -> None:
    candidates, stats, affine = _baseline3d_candidates()
    assert stats and affine and not stats & affine
    tried = []

    def write(dst: Path, candidate) -> None:
        tried.append(candidate.cast.kept_float32)
        dst.mkdir()

    def check(dst: Path) -> None:
        if set(tried[-1]) != stats:  # pretend only "statistics alone" runs
            raise RuntimeError("mixed dtypes")

    chosen = write_first_runnable(candidates, tmp_path / "v", write, check, sample=BASELINE3D)
    assert tried == [tuple(sorted(stats | affine)), tuple(sorted(stats))]
    assert chosen.cast.kept_float32 == tuple(sorted(stats)) and (tmp_path / "v").is_dir()
    dtypes = {m.name: m.dtype for m in chosen.metas}
    assert {dtypes[n] for n in stats} == {torch.float32}
    assert {dtypes[n] for n in affine} == {torch.float16}


def test_when_no_variant_runs_each_way_is_reported_and_nothing_is_left(tmp_path: Path) -> None:
    candidates, _, _ = _baseline3d_candidates("always")

    def check(dst: Path) -> None:
        raise RuntimeError("overflow")

    with pytest.raises(SampleError, match="does not run eagerly") as info:
        write_first_runnable(
            candidates, tmp_path / "v", lambda dst, c: dst.mkdir(), check, sample=BASELINE3D
        )
    message = info.value.message
    assert message.count("RuntimeError: overflow") == 3 and "casting all" in message
    assert not (tmp_path / "v").exists()


def test_a_variant_that_cannot_be_made_consistent_fails_with_the_node(tmp_path: Path) -> None:
    result = generalize_sample(VIT, tmp_path, dtypes=[], shape_factors=[2])
    (variant,) = result.variants
    assert variant.status is VariantStatus.FAILED and variant.name == "float32_S0-448"
    assert (
        "node=add" in variant.reason and "785" in variant.reason
    )  # patches vs fixed position table
    assert not (tmp_path / variant.name).exists()


TOY = textwrap.dedent(
    """\
    import torch


    class GraphModule(torch.nn.Module):
        def forward(self, L_x_: torch.Tensor, L_self_modules_fc_parameters_weight_: torch.nn.parameter.Parameter):
            h = torch.nn.functional.linear(L_x_, L_self_modules_fc_parameters_weight_)
            h = h.view(6, 2, 2)
            return (h.sum(1),)
    """
)


def test_undeclared_batch_dimension_is_found_by_probing(tmp_path: Path) -> None:
    sample = write_sample(
        tmp_path / "toy",
        TOY,
        [
            TensorMeta("L_x_", [6, 5], torch.float32, mean=0.0, std=1.0),
            TensorMeta(
                "L_self_modules_fc_parameters_weight_", [4, 5], torch.float32, mean=0.0, std=0.5
            ),
        ],
    )
    result = generalize_sample(sample, tmp_path / "out", dtypes=[], shape_factors=[2])
    assert result.probed and result.symbols == {"S0": 6}
    (path,) = written(result).values()
    assert "view(12, 2, 2)" in (path / "model.py").read_text()
    assert run(path)[0].shape == (12, 2)
    assert "S0" in (path / "input_tensor_constraints.py").read_text()


def test_a_broken_sample_is_an_error_result(tmp_path: Path) -> None:
    bad = write_sample(tmp_path / "bad", "import torch\n", [TensorMeta("L_x_", [2], torch.float32)])
    result = generalize_sample(bad, tmp_path / "out")
    assert result.status == "error" and result.error is not None and result.variants == []


def test_symbolic_dims_of_intermediates_follow_the_declared_symbols() -> None:
    dims = infer_symbolic_dims(trace_parent(BERT))
    assert dims.shape("expand") == ["S0", 1, "S1", "S1"]
    assert dims.shape("linear") == ["S0", "S1", 128]
    assert dims.shape("transpose") == ["S0", 2, "S1", 64]
    assert dims.shape("linear", ["S0"]) == ["S0", 11, 128]  # S1 left out: its example value
    assert not dims.failures


def test_decomposed_subgraphs_generalize_through_their_constraints(tmp_path: Path) -> None:
    decompose_sample(BERT, tmp_path / "sub", ["fusible"])
    mask = tmp_path / "sub" / BERT.name / "fusible" / "0010-0015"
    results = generalize_samples([mask], tmp_path / "var", dtypes=["float16"], shape_factors=[2])
    paths = written(results[0])
    assert {"float16", "float32_S1-22", "float16_S1-22"} <= set(paths)
    assert run(paths["float16_S1-22"])[0].shape == (1, 1, 22, 22)
    again = generalize_samples([mask], tmp_path / "var", dtypes=["float16"], shape_factors=[2])
    assert again[0].to_dict() == results[0].to_dict()  # resumed from generalize.jsonl


def test_cli_generalize_lists_failed_variants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.cli import main

    assert (
        main(["generalize", str(VIT), "--out", str(tmp_path), "--dtypes", "--shape-factors", "2"])
        == 0
    )
    err = capsys.readouterr().err  # a warning: on stderr
    assert "warning: variant failed" in err and "float32_S0-448" in err


def test_a_scaled_shape_over_the_size_bound_is_too_large_in_every_dtype(tmp_path: Path) -> None:
    free = generalize_sample(
        BERT, tmp_path / "free", dtypes=["float16"], shape_factors=[2, 4], max_variant_mb=None
    )
    nbytes = {v.name: v.nbytes for v in free.variants}
    assert 0 < nbytes["float32_S1-22"] < nbytes["float32_S1-44"]
    assert nbytes["float16_S1-44"] == nbytes["float32_S1-44"]  # the bound reads float32
    bound_mb = (nbytes["float32_S1-22"] + nbytes["float32_S1-44"]) / 2 / 1e6
    bounded = generalize_sample(
        BERT,
        tmp_path / "bounded",
        dtypes=["float16"],
        shape_factors=[2, 4],
        max_variant_mb=bound_mb,
    )
    status = {v.name: v.status for v in bounded.variants}
    assert status["float32_S1-44"] is status["float16_S1-44"] is VariantStatus.TOO_LARGE
    assert status["float16"] is status["float32_S1-22"] is VariantStatus.WRITTEN
    large = next(v for v in bounded.variants if v.name == "float16_S1-44")
    assert f"{nbytes['float32_S1-44'] / 1e6:.1f} MB" in large.reason
    assert f"{bound_mb:g} MB" in large.reason and not large.path
    assert not (tmp_path / "bounded" / "float16_S1-44").exists()
    # Under the bound, a variant is written byte for byte as without one.
    for name in ("float16", "float32_S1-22", "float16_S1-22"):
        assert status[name] is VariantStatus.WRITTEN
        for f in sorted((tmp_path / "free" / name).iterdir()):
            assert f.read_bytes() == (tmp_path / "bounded" / name / f.name).read_bytes()


def test_a_scaled_shape_is_made_once_for_all_its_dtypes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from passnet.dataset import _generalize

    calls: list[dict[str, int]] = []
    shape_run = _generalize._ShapeContext.shape_run

    def counted(self, sizes, *args, **kwargs):  # noqa: ANN001, ANN202 - a spy
        calls.append(dict(sizes))
        return shape_run(self, sizes, *args, **kwargs)

    monkeypatch.setattr(_generalize._ShapeContext, "shape_run", counted)
    result = generalize_sample(BERT, tmp_path, dtypes=["float16", "bfloat16"], shape_factors=[2])
    assert len(written(result)) == 8  # 2 dtypes, and 2 symbols × 3 dtypes
    assert calls == [{"S0": 2}, {"S1": 22}]


def test_cli_generalize_counts_too_large_variants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.cli import main

    args = ["generalize", str(BERT), "--out", str(tmp_path), "--dtypes", "float16"]
    assert main([*args, "--shape-factors", "2", "--max-variant-mb", "1e-6"]) == 0
    out = capsys.readouterr().out
    assert "too large" in out
    (result,) = read_generalize_manifest(tmp_path / "generalize.jsonl")
    assert {v.name: v.status.value for v in result.variants} == {
        "float16": "written",
        **{f"{d}_{s}": "too_large" for d in ("float32", "float16") for s in ("S0-2", "S1-22")},
    }


def test_float16_convolutions_run_in_float32_on_the_cpu_with_the_same_results() -> None:
    x = torch.randn(1, 3, 20, 16).half()
    w = torch.randn(8, 3, 5, 5).half()
    with half_convolutions_in_float32():
        fast = torch.nn.functional.conv2d(x, w, None, 1, 2)
        with pytest.raises(RuntimeError):  # mixed dtypes fail as they do without the mode
            torch.conv2d(x, w.float())
    reference = torch.conv2d(x, w, None, 1, 2)
    assert fast.dtype == torch.float16 and fast.shape == reference.shape
    torch.testing.assert_close(fast, reference, rtol=2e-3, atol=2e-3)


def _tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != "generalize.jsonl"
    }


def test_a_crash_or_a_hang_is_that_samples_record_and_the_batch_goes_on(tmp_path: Path) -> None:
    from tests.dataset.test_decompose import make_toy
    from tests.dataset.test_decompose_batch import _toy_with

    root = tmp_path / "in"
    samples = [
        make_toy(root / "a_good"),
        _toy_with(root / "b_crash", "ctypes.string_at(0)"),
        _toy_with(root / "c_hang", "time.sleep(600)"),
        make_toy(root / "d_good"),
    ]
    results = generalize_samples(
        samples, tmp_path / "var", dtypes=["float16"], shape_factors=[], timeout_s=15, unique=False
    )
    by_name = {r.name: r for r in results}
    assert by_name["b_crash"].status == "crashed"
    assert "SIGSEGV" in by_name["b_crash"].error.message
    assert by_name["c_hang"].status == "timeout"
    assert "15 s" in by_name["c_hang"].error.message
    for good in ("a_good", "d_good"):
        assert by_name[good].status == "ok" and written(by_name[good]), by_name[good].error
    recorded = read_generalize_manifest(tmp_path / "var" / "generalize.jsonl")
    assert sorted(r.status for r in recorded) == ["crashed", "ok", "ok", "timeout"]
    assert all(r.graph_hash for r in recorded)  # a failed sample's record names its graph


def test_jobs_write_the_files_one_job_writes(tmp_path: Path) -> None:
    from tests.dataset.test_decompose import make_toy

    samples = [make_toy(tmp_path / "in" / f"toy{i}") for i in range(3)]
    options = {"dtypes": ["float16", "bfloat16"], "shape_factors": [], "unique": False}
    one = generalize_samples(samples, tmp_path / "one", **options)
    two = generalize_samples(samples, tmp_path / "two", jobs=2, **options)
    assert [r.status for r in one] == [r.status for r in two] == ["ok"] * 3
    assert _tree(tmp_path / "one") == _tree(tmp_path / "two") != {}
    in_process = generalize_samples(samples, tmp_path / "in-process", isolated=False, **options)
    assert _tree(tmp_path / "in-process") == _tree(tmp_path / "one")
    assert [r.status for r in in_process] == ["ok"] * 3


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--jobs", "0", "--jobs must be 1 or more"),
        ("--timeout", "0", "--timeout must be a positive number of seconds"),
        ("--memory-limit-gb", "-1", "--memory-limit-gb must be 0 (no limit) or more"),
    ],
)
def test_generalize_options_out_of_range_stop_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    from passnet.cli import main

    assert main(["generalize", str(BERT), "--out", str(tmp_path / "v"), option, value]) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "v").exists()


def test_a_graph_is_generalized_once_and_its_duplicates_name_the_one_that_was(
    tmp_path: Path,
) -> None:
    from tests.dataset.test_decompose import make_toy

    samples = [make_toy(tmp_path / "in" / f"toy{i}") for i in range(3)]
    options = {"dtypes": ["float16"], "shape_factors": []}
    results = generalize_samples(samples, tmp_path / "var", **options)
    assert [r.status for r in results] == ["ok", "duplicate", "duplicate"]
    assert [r.duplicate_of for r in results] == ["", "toy0", "toy0"]
    assert written(results[0]) and not (tmp_path / "var" / "toy1").exists()
    assert results[1].graph_hash == results[0].graph_hash != ""
    # resumed as they are; a later batch's sample of the same graph is a duplicate too
    again = generalize_samples(samples, tmp_path / "var", **options)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in results]
    late = generalize_samples([make_toy(tmp_path / "in" / "toy9")], tmp_path / "var", **options)
    assert late[0].status == "duplicate" and late[0].duplicate_of == "toy0"
    recorded = read_generalize_manifest(tmp_path / "var" / "generalize.jsonl")
    assert {r.name: r.status for r in recorded} == {
        "toy0": "ok",
        "toy1": "duplicate",
        "toy2": "duplicate",
        "toy9": "duplicate",
    }
    # asked for, every sample is generalized
    each = generalize_samples(samples, tmp_path / "each", unique=False, **options)
    assert [r.status for r in each] == ["ok"] * 3
