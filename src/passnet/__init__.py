"""passnet: compiler pass generation research on real PyTorch computation graphs."""

__version__ = "0.1.0"
