"""passnet: compiler pass generation research on real PyTorch computation graphs."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # ``passnet.extract`` without importing torch and the dataset package on ``import passnet``.
    if name == "extract":
        from passnet.dataset import extract

        return extract
    raise AttributeError(f"module 'passnet' has no attribute {name!r}")
