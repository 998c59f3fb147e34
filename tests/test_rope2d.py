"""2-D rotary positions (backends.rope2d): the id builders bit-identical on every backend and equal
to Hugging Face's; apply_rope2d within the derived bound of the float64 reference on every
backend and dtype, the bound with teeth; Hugging Face's own vision rotary modules within it;
Pixtral's and MoonViT's two forms equal once q and k are permuted as the conversion permutes
them; Flux's and EVA-02's owners' functions, transcribed, within it too."""

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import vision_utils
from transformers.models.dinov3_vit import modeling_dinov3_vit
from transformers.models.dinov3_vit.configuration_dinov3_vit import DINOv3ViTConfig
from transformers.models.kimi_k25 import modeling_kimi_k25
from transformers.models.kimi_k25.configuration_kimi_k25 import Kimi_K25VisionConfig
from transformers.models.llama4 import modeling_llama4
from transformers.models.llama4.configuration_llama4 import Llama4VisionConfig
from transformers.models.pixtral import modeling_pixtral
from transformers.models.pixtral.configuration_pixtral import PixtralVisionConfig
from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig

import backends
from backends import rope2d
from embedding_parity.conformance.adapters.vision_torch import (
    mistral_freqs_cis_2d,
    mistral_rotated,
)

SPECS = rope2d.SPECS
HEAD_DIM = 16  # Flux's sections fix its head at 128
LOW = ("float32", "float16", "bfloat16")


def head_dim(name: str) -> int:
    return sum(SPECS[name].sections) if SPECS[name].sections else HEAD_DIM


def tokens(name: str, grid) -> np.ndarray:
    """The positions a model's tower gives a grid: Qwen2-VL's in its merge-block order, a CLS
    (-1, -1) where the model has one, last for Llama 4 (it appends CLS), first for DINOv3 and
    EVA-02."""
    if name == "qwen2-vl":
        return rope2d.merge_ids(grid)
    prefix = int(SPECS[name].prefix != "none")
    return rope2d.raster_ids(grid, prefix=prefix, prefix_last=name == "llama-4")


def vectors(n: int, dim: int, dtype="float64", seed=0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((2, n, dim))  # (heads, N, head_dim)
    return x.astype(backends.DTYPES[dtype])


def worst(y, reference, bound) -> tuple[float, float]:
    """(max |y - reference|, max |y - reference| / bound) over the elements: 0 / 0 is 0, a
    difference where the bound is 0 (a prefix token, returned as it is) infinitely far."""
    diff = np.abs(np.asarray(y, dtype=np.float64) - reference)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(diff == 0, 0.0, diff / bound)
    return float(diff.max()), float(ratio.max())


# --- the id builders ------------------------------------------------------------------------


# assert_array_equal ignores dtypes: the builders' own, JAX's int32 (no int64 without x64 mode)
ID_DTYPES = {"numpy": np.int64, "torch": np.int64, "jax": np.int32}


@settings(max_examples=15, deadline=None)  # a new grid compiles JAX's builder: 0.1 s
@given(
    builder=st.sampled_from(sorted(rope2d.ID_BUILDERS)),
    blocks=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    merge=st.sampled_from([1, 2]),
    window=st.integers(1, 3),
    prefix=st.integers(0, 5),
    prefix_last=st.booleans(),
)
def test_the_id_builders_are_bit_identical_on_every_backend(
    builder, blocks, merge, window, prefix, prefix_last
):
    grid = (blocks[0] * merge, blocks[1] * merge)  # non-square both ways as hypothesis draws
    options = {
        "raster": {"prefix": prefix, "prefix_last": prefix_last},
        "merge": {"merge": merge},
        "window": {"merge": merge, "window": window},
        "flat": {"max_width": grid[1] + prefix},
    }[builder]
    expected = rope2d.ID_BUILDERS[builder](grid, **options)
    for name in backends.names():
        backend = backends.get(name)
        got = backend.to_numpy(getattr(backend, f"{builder}_ids")(grid, **options))
        np.testing.assert_array_equal(got, expected, err_msg=f"{builder} on {name}")
        assert got.dtype == ID_DTYPES[name], f"{builder} on {name}: {got.dtype}"


@pytest.mark.parametrize("grid", [(8, 12), (12, 8), (4, 4), (6, 10)])
def test_the_merge_and_window_orders_are_qwen2_5_vl_s_own(grid):
    """Hugging Face's get_vision_position_ids, and its window index applied to them as the
    tower applies it to the patches and to cos/sin (permute_input_for_window_attn)."""
    grid_thw = torch.tensor([[1, *grid]])
    ids = vision_utils.get_vision_position_ids(grid_thw, 2)
    np.testing.assert_array_equal(rope2d.merge_ids(grid, merge=2), ids.numpy())
    index, _ = vision_utils.get_vision_window_index(
        grid_thw, spatial_merge_size=2, window_size=56, patch_size=14  # 2 merged units a side
    )
    in_windows = ids.reshape(-1, 4, 2)[index].reshape(-1, 2)
    np.testing.assert_array_equal(rope2d.window_ids(grid, merge=2, window=2), in_windows.numpy())
    assert not np.array_equal(rope2d.merge_ids(grid), rope2d.raster_ids(grid)) or grid[1] == 2


def test_pixtral_s_flat_ids_are_its_raster_ids():
    grid, max_width = (3, 5), 7
    flat = rope2d.flat_ids(grid, max_width=max_width)
    np.testing.assert_array_equal(np.stack(np.divmod(flat, max_width), -1), rope2d.raster_ids(grid))


# --- apply_rope2d against the float64 reference ------------------------------------------------


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_spec_is_within_its_bound_on_every_backend_in_float32(backend, name):
    grid = (4, 6)
    positions = tokens(name, grid)
    x = vectors(len(positions), head_dim(name), "float32")
    reference = rope2d.apply_rope2d(x, positions, spec=SPECS[name], grid=grid)
    bound = rope2d.bound(x, positions, spec=SPECS[name], grid=grid)
    got = backend.to_numpy(backend.apply_rope2d(x, positions, spec=SPECS[name], grid=grid))
    assert got.dtype == x.dtype
    assert worst(got, reference, bound)[1] <= 1


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", ["pixtral", "llama-4", "dinov3"])  # half, complex, normalized
def test_each_layout_and_coordinate_rule_is_within_its_bound_in_every_dtype(backend, name, dtype):
    grid = (4, 6)  # float32's JAX programs compiled by the test above
    positions = tokens(name, grid)
    x = vectors(len(positions), head_dim(name), dtype, seed=1)
    reference = rope2d.apply_rope2d(x, positions, spec=SPECS[name], grid=grid)
    bound = rope2d.bound(x, positions, spec=SPECS[name], grid=grid)
    got = backend.to_numpy(backend.apply_rope2d(x, positions, spec=SPECS[name], grid=grid))
    assert worst(got, reference, bound)[1] <= 1


def _swap(value, one, other):
    return other if value == one else one


MISTAKES = {  # name: (the model, what a port gets wrong: its spec, its positions)
    "slots swapped": ("pixtral", lambda s: dataclasses.replace(s, slots="blocks"), None),
    "layout swapped": (
        "qwen2.5-vl",
        lambda s: dataclasses.replace(s, layout=_swap(s.layout, "half", "interleaved")),
        None,
    ),
    "y-first for x-first": ("llama-4", lambda s: dataclasses.replace(s, first="h"), None),
    "0-based for 1-based": (
        "llama-4",
        lambda s: dataclasses.replace(s, coordinates="0-based"),
        None,
    ),
    "CLS rotated": ("llama-4", None, lambda p: np.where(p < 0, 0, p)),
    "raster for merge order": ("qwen2-vl", None, lambda p: rope2d.raster_ids((4, 6))),
}


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_the_bound_has_teeth(mistake, dtype):
    """Each mistake ports make, computed by the torch backend, is far outside the right rule's
    bound: the bound tells right from wrong in every dtype."""
    name, wrong_spec, wrong_positions = MISTAKES[mistake]
    grid = (4, 6)
    spec, positions = SPECS[name], tokens(name, grid)
    x = vectors(len(positions), head_dim(name), dtype, seed=2)
    reference = rope2d.apply_rope2d(x, positions, spec=spec, grid=grid)
    bound = rope2d.bound(x, positions, spec=spec, grid=grid)
    torch_backend = backends.get("torch")
    wrong = torch_backend.apply_rope2d(
        x,
        positions if wrong_positions is None else wrong_positions(positions),
        spec=spec if wrong_spec is None else wrong_spec(spec),
        grid=grid,
    )
    assert worst(torch_backend.to_numpy(wrong), reference, bound)[1] > 4  # measured: 81 to 10**6


@settings(max_examples=20, deadline=None)
@given(
    name=st.sampled_from(["pixtral", "qwen2.5-vl", "llama-4", "moonvit", "eva-02", "flux"]),
    q_at=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    k_at=st.tuples(st.integers(0, 40), st.integers(0, 40)),
    shift=st.tuples(st.integers(0, 40), st.integers(0, 40)),
)
def test_q_dot_k_depends_only_on_the_offset_for_integer_coordinates(name, q_at, k_at, shift):
    spec, dim = SPECS[name], head_dim(name)
    q, k = vectors(1, dim, seed=3)[:, 0]
    at = np.array([q_at, k_at])
    moved = at + shift
    grid = (81, 96)  # the positions' range; EVA-02 stretches them to its (16, 16) by it
    dots = []
    for positions in (at, moved):
        turned = rope2d.apply_rope2d(np.stack([q, k]), positions, spec=spec, grid=grid)
        bound = rope2d.bound(np.stack([q, k]), positions, spec=spec, grid=grid)
        # |q'.k' - exact| <= |q'|.b_k + |k'|.b_q + the dot's own rounding, dim eps sum|q' k'|
        slack = np.abs(turned[0]) @ bound[1] + np.abs(turned[1]) @ bound[0]
        slack += dim * np.finfo(np.float64).eps * np.abs(turned[0]) @ np.abs(turned[1])
        dots.append((turned[0] @ turned[1], slack))
    (first, slack_1), (second, slack_2) = dots
    assert abs(first - second) <= slack_1 + slack_2


# --- Hugging Face's own modules ----------------------------------------------------------------


def test_pixtral_s_rotary_module_is_the_spec():
    config = PixtralVisionConfig(hidden_size=64, num_attention_heads=4, head_dim=HEAD_DIM)
    grid = (4, 6)
    positions = rope2d.raster_ids(grid)
    x = vectors(len(positions), HEAD_DIM, "float32", seed=4)
    hf = torch.from_numpy(x)
    rotary = modeling_pixtral.PixtralVisionRotaryEmbedding(config)
    cos, sin = rotary(hf, torch.from_numpy(positions))
    q, _ = modeling_pixtral.apply_rotary_pos_emb(hf, hf, cos, sin, unsqueeze_dim=0)
    reference = rope2d.apply_rope2d(x, positions, spec=SPECS["pixtral"])
    assert worst(q.numpy(), reference, rope2d.bound(x, positions, spec=SPECS["pixtral"]))[1] <= 1


def test_qwen2_5_vl_s_rotary_module_is_the_spec_in_its_window_order():
    config = Qwen2_5_VLVisionConfig(hidden_size=64, num_heads=4, depth=1)
    grid = (8, 12)
    grid_thw = torch.tensor([[1, *grid]])
    ids = vision_utils.get_vision_position_ids(grid_thw, 2)
    index, _ = vision_utils.get_vision_window_index(
        grid_thw, spatial_merge_size=2, window_size=56, patch_size=14
    )
    positions = rope2d.window_ids(grid, merge=2, window=2)
    x = vectors(len(positions), HEAD_DIM, "float32", seed=5)[0]  # (N, head_dim), one head
    rotary = modeling_qwen2_5_vl.Qwen2_5_VLVisionRotaryEmbedding(config)
    cos, sin = rotary(torch.from_numpy(x), ids)
    cos, sin = (f.reshape(-1, 4, HEAD_DIM)[index].reshape(-1, HEAD_DIM) for f in (cos, sin))
    hf = torch.from_numpy(x)[:, None]  # (N, heads, head_dim) as the attention holds q
    q, _ = modeling_qwen2_5_vl.apply_rotary_pos_emb_vision(hf, hf, cos, sin)
    reference = rope2d.apply_rope2d(x, positions, spec=SPECS["qwen2.5-vl"])
    bound = rope2d.bound(x, positions, spec=SPECS["qwen2.5-vl"])
    assert worst(q[:, 0].numpy(), reference, bound)[1] <= 1


def test_llama_4_s_rotary_module_is_the_spec_with_its_cls_last():
    config = Llama4VisionConfig(hidden_size=64, num_attention_heads=4, image_size=56, patch_size=14)
    positions = rope2d.raster_ids((4, 4), prefix=1, prefix_last=True)
    x = vectors(len(positions), HEAD_DIM, "float32", seed=6)
    hf = torch.from_numpy(x).transpose(0, 1)[None]  # (1, N, heads, head_dim) as the tower holds q
    freqs_ci = modeling_llama4.Llama4VisionRotaryEmbedding(config)(hf)
    q, _ = modeling_llama4.vision_apply_rotary_emb(hf, hf, freqs_ci)
    got = q[0].transpose(0, 1).numpy()
    reference = rope2d.apply_rope2d(x, positions, spec=SPECS["llama-4"])
    assert worst(got, reference, rope2d.bound(x, positions, spec=SPECS["llama-4"]))[1] <= 1
    np.testing.assert_array_equal(got[:, -1], x[:, -1])  # the CLS comes back as it was


def test_dinov3_s_rotary_module_is_the_spec_past_its_prefix_tokens():
    """transformers' DINOv3 port (its own inv_freq form of the periods, 2 pi c inv_freq) on a
    grid other than its config's, CLS and four registers skipped."""
    config = DINOv3ViTConfig(hidden_size=64, num_attention_heads=4, patch_size=2, image_size=8)
    grid = (3, 5)
    positions = rope2d.raster_ids(grid, prefix=5)
    x = vectors(len(positions), HEAD_DIM, "float32", seed=8)
    pixels = torch.zeros(1, 3, 2 * grid[0], 2 * grid[1])
    rotary = modeling_dinov3_vit.DINOv3ViTRopePositionEmbedding(config).eval()  # no jitter
    cos, sin = rotary(pixels)
    hf = torch.from_numpy(x)
    q, _ = modeling_dinov3_vit.apply_rotary_pos_emb(hf, hf, cos, sin)
    spec = SPECS["dinov3"]
    reference = rope2d.apply_rope2d(x, positions, spec=spec, grid=grid)
    bound = rope2d.bound(x, positions, spec=spec, grid=grid)
    assert worst(q.numpy(), reference, bound)[1] <= 1
    np.testing.assert_array_equal(q[:, :5].numpy(), x[:, :5])  # CLS and registers untouched


def test_dinov3_s_periods_from_min_and_max_are_its_own():
    """DINOv3's other parametrization (rope_position_encoding.py, as the owner writes it, in
    float64): periods = base**linspace(0, 1, D/4) / base * max_period, base = max / min."""
    spec = rope2d.Rope2D("blocks", frequencies="periods", periods=(0.5, 40.0))
    base = torch.tensor(40.0 / 0.5, dtype=torch.float64)
    exponents = torch.linspace(0, 1, HEAD_DIM // 4, dtype=torch.float64)
    periods = base**exponents / base * 40.0
    expected = np.tile(2 * np.pi / periods.numpy(), 2)  # [h | w], each axis the same ladder
    # two computations of base**e / base * max, each a pow (|ln base| eps + eps) and three
    # roundings, and the quotient 2 pi / period two more: within (2 |ln base| + 12) eps
    eps = (2 * np.log(80.0) + 12) * np.finfo(np.float64).eps
    np.testing.assert_allclose(rope2d.slot_map(HEAD_DIM, spec).frequency, expected, rtol=eps)


def test_moonvit_s_rotary_module_is_the_spec_once_q_is_permuted_as_the_conversion_permutes_it():
    """Moonshot's checkpoint (and mlx-vlm's Rope2DPosEmb) rotates complex pairs, the spec's form;
    transformers' Kimi-K2.5 tower turns half-layout pairs, its conversion permuting each head's q
    and k rows (conversion_mapping.py "kimi_k25": PermuteForRope, backends.rope_permutation's
    order). Its forward takes the (N, 2) ids get_vision_position_ids gives (its comment says
    (2, N))."""
    config = Kimi_K25VisionConfig(hidden_size=64, num_attention_heads=4)  # head_dim 16
    grid = (4, 6)
    positions = rope2d.raster_ids(grid)
    ids = vision_utils.get_vision_position_ids(torch.tensor([[1, *grid]]), 1)  # as the tower
    np.testing.assert_array_equal(ids.numpy(), positions)
    x = vectors(len(positions), HEAD_DIM, "float32", seed=9)[0]  # (N, head_dim), one head
    cos, sin = modeling_kimi_k25.Kimi_K25VisionRotaryEmbedding(config)(torch.from_numpy(x), ids)

    def hf(q):
        q = torch.from_numpy(q)[:, None]  # (N, heads, head_dim) as the attention holds q
        return modeling_kimi_k25.apply_rotary_pos_emb_vision(q, q, cos, sin)[0][:, 0].numpy()

    spec, perm = SPECS["moonvit"], backends.rope_permutation(HEAD_DIM)
    reference = rope2d.apply_rope2d(x, positions, spec=spec)
    bound = rope2d.bound(x, positions, spec=spec)
    assert worst(hf(x[..., perm]), reference[..., perm], bound[..., perm])[1] <= 1
    assert worst(hf(x), reference, bound)[1] > 100  # unpermuted: measured 10**6 and more


@pytest.mark.parametrize("grid", [(4, 6), (6, 4)])
def test_pixtral_s_two_forms_agree_once_q_is_permuted_as_the_conversion_permutes_it(grid):
    """Mistral's checkpoint rotates complex pairs; transformers' conversion permutes each head's
    q and k rows (backends.rope_permutation) so that its half layout turns the same pairs."""
    config = PixtralVisionConfig(hidden_size=64, num_attention_heads=4, head_dim=HEAD_DIM)
    positions = rope2d.raster_ids(grid)
    x = vectors(len(positions), HEAD_DIM, "float32", seed=7)
    freqs_cis = mistral_freqs_cis_2d(HEAD_DIM, *grid, 10000.0)[positions[:, 0], positions[:, 1]]
    held = torch.from_numpy(x).movedim(0, 1)  # (N, heads, head_dim), as Mistral's encoder holds q
    mistral = mistral_rotated(held, freqs_cis).movedim(1, 0).numpy()
    perm = backends.rope_permutation(HEAD_DIM)
    rotary = modeling_pixtral.PixtralVisionRotaryEmbedding(config)

    def hf(q):
        cos, sin = rotary(torch.from_numpy(q), torch.from_numpy(positions))
        q = torch.from_numpy(q)
        return modeling_pixtral.apply_rotary_pos_emb(q, q, cos, sin, unsqueeze_dim=0)[0].numpy()

    complex_spec = dataclasses.replace(SPECS["pixtral"], layout="interleaved")
    bound = rope2d.bound(x, positions, spec=complex_spec)
    assert worst(mistral, rope2d.apply_rope2d(x, positions, spec=complex_spec), bound)[1] <= 1
    # HF's and Mistral's each within the bound of the reference: within twice it of each other
    assert worst(hf(x[..., perm]), mistral[..., perm], 2 * bound[..., perm])[1] <= 1
    assert worst(hf(x), mistral, 2 * bound)[1] > 100  # unpermuted: measured 10**5 and more


# diffusers, src/diffusers/models/embeddings.py (commit 58eb52c): get_1d_rotary_pos_embed and
# apply_rotary_emb in the branches Flux takes (use_real=True, repeat_interleave_real=True, on the
# CPU; use_real_unbind_dim=-1, sequence_dim=1); models/transformers/transformer_flux.py:
# FluxPosEmbed.forward (maybe_adjust_dtype_for_device keeps float64 on the CPU);
# pipelines/flux/pipeline_flux.py: _prepare_latent_image_ids.
def diffusers_get_1d_rotary_pos_embed(
    dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
    repeat_interleave_real=True, freqs_dtype=torch.float32,
):
    assert dim % 2 == 0
    theta = theta * ntk_factor
    freqs = (
        1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim))
        / linear_factor
    )  # [D/2]
    freqs = torch.outer(pos, freqs)  # [S, D/2]
    freqs_cos = freqs.cos().repeat_interleave(2, dim=1, output_size=freqs.shape[1] * 2).float()
    freqs_sin = freqs.sin().repeat_interleave(2, dim=1, output_size=freqs.shape[1] * 2).float()
    return freqs_cos, freqs_sin


def diffusers_flux_pos_embed(ids, theta=10000, axes_dim=(16, 56, 56)):
    n_axes = ids.shape[-1]
    cos_out = []
    sin_out = []
    pos = ids.float()
    freqs_dtype = torch.float64
    for i in range(n_axes):
        cos, sin = diffusers_get_1d_rotary_pos_embed(
            axes_dim[i], pos[:, i], theta=theta, repeat_interleave_real=True, use_real=True,
            freqs_dtype=freqs_dtype,
        )
        cos_out.append(cos)
        sin_out.append(sin)
    freqs_cos = torch.cat(cos_out, dim=-1).to(ids.device)
    freqs_sin = torch.cat(sin_out, dim=-1).to(ids.device)
    return freqs_cos, freqs_sin


def diffusers_apply_rotary_emb(x, freqs_cis):
    cos, sin = freqs_cis  # [S, D]
    cos = cos[None, :, None, :]
    sin = sin[None, :, None, :]
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)  # [B, S, H, D//2]
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def diffusers_prepare_latent_image_ids(batch_size, height, width, device, dtype):
    latent_image_ids = torch.zeros(height, width, 3)
    latent_image_ids[..., 1] = latent_image_ids[..., 1] + torch.arange(height)[:, None]
    latent_image_ids[..., 2] = latent_image_ids[..., 2] + torch.arange(width)[None, :]
    latent_image_id_height, latent_image_id_width, latent_image_id_channels = latent_image_ids.shape
    latent_image_ids = latent_image_ids.reshape(
        latent_image_id_height * latent_image_id_width, latent_image_id_channels
    )
    return latent_image_ids.to(device=device, dtype=dtype)


@pytest.mark.parametrize("grid", [(4, 6), (6, 4)])
def test_flux_is_diffusers_as_its_owner_wrote_it(grid):
    """Flux's three ladders (t, h, w each its own, over 16, 56 and 56 dims), its ids (0, row,
    column) and its interleaved rotation, in float32 from float64 frequencies."""
    ids = diffusers_prepare_latent_image_ids(1, *grid, "cpu", torch.float32)
    positions = rope2d.raster_ids(grid)
    np.testing.assert_array_equal(ids.numpy(), np.pad(positions, ((0, 0), (1, 0))))
    spec, dim = SPECS["flux"], head_dim("flux")
    x = vectors(len(positions), dim, "float32", seed=10)  # (heads, N, head_dim)
    hf = torch.from_numpy(x).transpose(0, 1)[None]  # (1, N, heads, head_dim) as Flux holds q
    got = diffusers_apply_rotary_emb(hf, diffusers_flux_pos_embed(ids))[0].transpose(0, 1)
    reference = rope2d.apply_rope2d(x, positions, spec=spec)
    assert worst(got.numpy(), reference, rope2d.bound(x, positions, spec=spec))[1] <= 1


# timm, timm/layers/pos_embed_sincos.py (commit 0647e28): freq_bands, build_fourier_pos_embed
# and build_rotary_pos_embed in the branches RotaryEmbeddingCat takes for EVA (in_pixels=False,
# bands given), rot and apply_rot_embed_cat; timm/models/eva.py (commit aa4b585) rotates only the
# tokens past the prefix: cat([q[:, :, :npt], apply_rot_embed_cat(q[:, :, npt:], rope)]).
def timm_rope_freq_bands(num_bands, temperature=10000.0, step=2, device=None):
    exp = (
        torch.arange(0, num_bands, step, dtype=torch.int64, device=device).to(torch.float32)
        / num_bands
    )
    bands = 1.0 / (temperature**exp)
    return bands


def timm_build_fourier_pos_embed(
    feat_shape, bands, ref_feat_shape=None, grid_offset=0.0, grid_indexing="ij", device=None,
    dtype=torch.float32,
):
    t = [
        torch.arange(s, device=device, dtype=torch.int64).to(torch.float32) + grid_offset
        for s in feat_shape
    ]
    if ref_feat_shape is not None:
        # eva's scheme for resizing rope embeddings (ref shape = pretrain)
        t = [x / f * r for x, f, r in zip(t, feat_shape, ref_feat_shape)]
    grid = torch.stack(torch.meshgrid(t, indexing=grid_indexing), dim=-1)
    grid = grid.unsqueeze(-1)
    pos = grid * bands
    pos_sin, pos_cos = pos.sin().to(dtype=dtype), pos.cos().to(dtype=dtype)
    return [pos_sin, pos_cos]


def timm_build_rotary_pos_embed(feat_shape, bands, ref_feat_shape=None):
    sin_emb, cos_emb = timm_build_fourier_pos_embed(feat_shape, bands, ref_feat_shape)
    num_spatial_dim = 1
    for x in feat_shape:
        num_spatial_dim *= x
    sin_emb = sin_emb.reshape(num_spatial_dim, -1).repeat_interleave(2, -1)
    cos_emb = cos_emb.reshape(num_spatial_dim, -1).repeat_interleave(2, -1)
    return sin_emb, cos_emb


def timm_rot(x):
    return torch.stack([-x[..., 1::2], x[..., ::2]], -1).reshape(x.shape)


def timm_apply_rot_embed_cat(x, emb):
    sin_emb, cos_emb = emb.chunk(2, -1)
    return x * cos_emb + timm_rot(x) * sin_emb


@pytest.mark.parametrize("grid", [(4, 6), (16, 16)])
def test_eva_02_is_timm_as_its_owner_wrote_it_at_any_grid(grid):
    """EVA-02's blocks [h | w] (dim / 4 bands a side), interleaved, the CLS left out, the
    coordinates stretched to its reference grid (16, 16) (ref_feat_shape, 224 px / patch 14):
    integers only on a 16 x 16 grid."""
    spec = SPECS["eva-02"]
    positions = rope2d.raster_ids(grid, prefix=1)
    x = vectors(len(positions), HEAD_DIM, "float32", seed=11)
    bands = timm_rope_freq_bands(HEAD_DIM // 4, temperature=10000.0, step=1)
    ref_feat_shape = (16, 16)  # models/eva.py, every eva02_* model: "224/14"
    rope = torch.cat(timm_build_rotary_pos_embed(grid, bands, ref_feat_shape), -1)
    q = torch.from_numpy(x)[None]  # (B, heads, N, head_dim) as eva.py holds q
    got = torch.cat([q[:, :, :1], timm_apply_rot_embed_cat(q[:, :, 1:], rope)], dim=2)[0]
    reference = rope2d.apply_rope2d(x, positions, spec=spec, grid=grid)
    bound = rope2d.bound(x, positions, spec=spec, grid=grid)
    assert worst(got.numpy(), reference, bound)[1] <= 1


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dim, positions, spec, message",
    [
        (16, np.zeros((6, 3), int), "pixtral", r"positions must be \(N, 2\) = \(6, 2\)"),
        (18, np.zeros((6, 2), int), "pixtral", "head_dim 18 must be a positive multiple of 4"),
        (64, np.zeros((6, 2), int), "flux", r"sections \[16, 56, 56\] add up to 128 dims"),
        (16, np.full((6, 2), -1), "pixtral", "prefix token's \\(-1, -1\\) but the spec's"),
        (16, np.zeros((6, 2), int), "dinov3", "pass grid=\\(h, w\\)"),
        (16, np.zeros((6, 2), int), "eva-02", r"reference_grid \(16, 16\) by the grid's sides"),
    ],
)
def test_bad_input_is_refused_the_same_way_on_every_backend(dim, positions, spec, message):
    x = vectors(6, dim, "float32")
    for name in backends.names():
        with pytest.raises(ValueError, match=message):
            backends.get(name).apply_rope2d(x, positions, spec=SPECS[spec])


def test_a_spec_by_name_is_refused_naming_the_specs():
    for name in backends.names():
        with pytest.raises(TypeError, match=r"spec must be a rope2d.Rope2D, got 'pixtral'"):
            backends.get(name).apply_rope2d(vectors(6, 16), np.zeros((6, 2), int), spec="pixtral")


def test_an_unknown_slot_rule_is_refused_naming_the_rules():
    with pytest.raises(ValueError, match="unknown Rope2D slots 'diagonal': valid ones are blocks"):
        rope2d.Rope2D("diagonal")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"reference_grid": (16, 0)}, r"Rope2D reference_grid \(16, 0\) must have h >= 1"),
        ({"reference_grid": (16, 16), "coordinates": "max"}, "normalized already: drop one"),
    ],
)
def test_a_reference_grid_is_two_positive_ints_for_integer_coordinates(fields, message):
    with pytest.raises(ValueError, match=message):
        rope2d.Rope2D("blocks", **fields)
