"""Slider-driven views for the notebooks. Each builder returns a widget (it never calls
``display``); the drawing is a pure function of the slider values that tests can call.

Works with ipywidgets 7.6+ (Colab) and 8.
"""

from ._common import figure_png, interactive_figure

__all__ = ["interactive_figure", "figure_png"]
