"""Tiny models for dataset tests (no torchvision here): each is a few ops of a real pattern."""

from __future__ import annotations

import textwrap

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """Linear → GELU → Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class ConvBnRelu(nn.Module):
    """Conv2d → BatchNorm2d (eval) → ReLU → global average pool."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(torch.relu(self.bn(self.conv(x))), 1).flatten(1)


class TinyAttention(nn.Module):
    """Token embedding, one self-attention block with a padding mask, LayerNorm residual."""

    def __init__(self, vocab: int = 50, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = attention_mask[:, None, None, :].to(torch.bool)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.norm(x + self.out(a.transpose(1, 2).reshape(b, t, d)))


class GraphBreak(nn.Module):
    """Two graphs: Dynamo breaks at the explicit graph break."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.fc(x))
        torch._dynamo.graph_break()
        return self.norm(y) * 2.0


class RepeatedBlock(nn.Module):
    """The same block on both sides of a graph break: two identical graphs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.fc(x))
        torch._dynamo.graph_break()
        return torch.tanh(self.fc(y))


class ScaledNorm(nn.Module):
    """A LayerNorm whose eps is a Python float attribute (lifted as a scalar when dynamic)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, 6))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (6,), self.weight, None, self.eps) + x.shape[0]


class VmapMask(nn.Module):
    """transformers' attention-mask construction: a causal and padding mask built by
    ``torch.vmap`` over batch, query and key indices (Dynamo writes the ``vmap`` as
    ``torch._functorch.predispatch`` calls), then masked attention scores."""

    def __init__(self, dim: int = 4) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        padding = attention_mask.to(torch.bool)

        def allowed(batch: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
            return (kv <= q) & padding[batch, kv]

        over_kv = torch.vmap(allowed, in_dims=(None, None, 0))
        over_q = torch.vmap(over_kv, in_dims=(None, 0, None))
        mask = torch.vmap(over_q, in_dims=(0, None, None))(
            torch.arange(b), torch.arange(t), torch.arange(t)
        )
        scores = self.proj(x) @ x.transpose(1, 2)
        return scores.masked_fill(~mask, -1e4).softmax(-1) @ x


def inputs_for(model: nn.Module) -> tuple[torch.Tensor, ...]:
    """Deterministic example inputs for each tiny model."""
    g = torch.Generator().manual_seed(0)
    if isinstance(model, ConvBnRelu):
        return (torch.randn(2, 3, 8, 8, generator=g),)
    if isinstance(model, TinyAttention):
        ids = torch.randint(0, 50, (2, 7), generator=g)
        mask = torch.ones(2, 7, dtype=torch.int64)
        mask[1, 5:] = 0
        return ids, mask
    if isinstance(model, VmapMask):
        mask = torch.ones(2, 5, dtype=torch.int64)
        mask[1, 3:] = 0
        return torch.randn(2, 5, 4, generator=g), mask
    if isinstance(model, ScaledNorm):
        return (torch.randn(3, 6, generator=g),)
    return (torch.randn(2, 4, generator=g),)


def build(cls: type[nn.Module]) -> nn.Module:
    """An instance in eval mode with seeded weights."""
    torch.manual_seed(0)
    return cls().eval()


# A model file whose forward calls a custom operator defined in the same file.
CUSTOM_OP_FILE = textwrap.dedent(
    """
    import torch

    @torch.library.custom_op("passnet_test_ext::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @twice.register_fake
    def _(x):
        return torch.empty_like(x)

    class Net(torch.nn.Module):
        def forward(self, x):
            return twice(torch.relu(x))

    def get_model():
        return Net()

    def get_inputs():
        return (torch.randn(5),)
    """
)
