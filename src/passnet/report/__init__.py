"""Reports: PNG plots of score curves and speedup distributions (tables live in passnet.score)."""

from passnet.report._plots import default_category_of, plot_score_curves, plot_speedup_violin

__all__ = ["default_category_of", "plot_score_curves", "plot_speedup_violin"]
