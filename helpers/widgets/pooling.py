"""View for notebook 02: Nadaraya-Watson kernel regression, its fit and its attention map together.

Legend: K training pairs (keys x_i, values y_i), Q queries (the test inputs). Weights are laid
out (Q, K), one row per query, each row summing to 1. The bandwidth is σ in the notebook's maths
and ``bandwidth`` in code.

``draw_nw`` is a pure function of the data and the slider values (kernel, bandwidth);
``nw_view`` wraps it in sliders; ``demo_views`` builds the view for the benchmark.
"""

from __future__ import annotations

import numbers

import ipywidgets as widgets
import numpy as np
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..checks import check_real
from ..kernel_regression import KERNELS, RegressionData, make_regression_data, nadaraya_watson
from ..plotting import to_numpy
from ._common import check_figure, interactive_figure, set_image_data, start_figure
from .page import PageView

__all__ = ["draw_nw", "nw_view", "demo_views"]

NW_LABEL = "pooling.nw"  # Figure label: tells draw_nw that a figure is its own
FIGSIZE = (9.0, 3.6)
# One colour scale for every bandwidth and kernel: 0 to 1, square-root spaced, so that the thin
# weights of a wide kernel (1/K each) stay visible next to the one-hot rows of a narrow one.
WEIGHT_NORM_GAMMA = 0.5
WEIGHT_TICKS = [0.0, 0.02, 0.1, 0.25, 0.5, 1.0]
BANDWIDTHS = (0.01, 10.0)  # the view's log-scale slider: 10^-2 to 10^1


def _check_data(data: object, *, optional: bool = False) -> None:
    if not (isinstance(data, RegressionData) or optional and data is None):
        kind = "a RegressionData or None" if optional else "a RegressionData"
        raise ValueError(f"data must be {kind} (make_regression_data()), got {type(data).__name__}")


def _layout_nw(fig: Figure, data: RegressionData) -> None:
    """(Re)build the artists: truth, prediction and training points left; the heatmap right."""
    x_train, y_train = to_numpy(data.x_train), to_numpy(data.y_train)
    x_test, y_truth = to_numpy(data.x_test), to_numpy(data.y_truth)
    start_figure(fig, NW_LABEL, fixed_layout=True)  # margins set below
    ax_fit, ax_map = fig.subplots(1, 2, width_ratios=[1.25, 1], gridspec_kw=dict(
        left=0.06, right=0.93, bottom=0.14, top=0.9, wspace=0.2))
    ax_fit.plot(x_test, y_truth, color="#1f77b4", label="truth")
    ax_fit.plot(x_test, np.zeros_like(x_test), color="#d62728", label="prediction")
    ax_fit.scatter(x_train, y_train, s=12, color="#7f7f7f", alpha=0.6, label="training data")
    low, high = min(y_train.min(), y_truth.min()), max(y_train.max(), y_truth.max())
    pad = 0.08 * (high - low)
    ax_fit.set_ylim(low - pad, high + pad)  # fixed, so the view does not jump between values
    ax_fit.set_xlabel("x")
    ax_fit.set_ylabel("y")
    ax_fit.legend(loc="upper right", fontsize="small")
    shape = (x_test.shape[0], x_train.shape[0])
    image = ax_map.imshow(np.zeros(shape), cmap="Reds", aspect="auto", interpolation="nearest",
                          norm=PowerNorm(WEIGHT_NORM_GAMMA, vmin=0.0, vmax=1.0))
    ax_map.set_xlabel("training inputs (keys, sorted)")
    ax_map.set_ylabel("test inputs (queries)")
    colorbar = fig.colorbar(image, ax=ax_map, fraction=0.06, pad=0.03)
    colorbar.set_ticks(WEIGHT_TICKS)  # fixed: the scale never moves with the sliders
    colorbar.set_label("weight (√ scale)", fontsize="small")
    # Few tick labels: laying out text is most of the cost of a redraw.
    ax_map.xaxis.set_major_locator(MaxNLocator(5, integer=True))
    ax_map.yaxis.set_major_locator(MaxNLocator(5, integer=True))


def _is_nw_figure(fig: Figure, data: RegressionData) -> bool:
    return (fig.get_label() == NW_LABEL and len(fig.axes) == 3 and len(fig.axes[0].lines) == 2
            and fig.axes[1].images[0].get_array().shape == (data.x_test.shape[0],
                                                            data.x_train.shape[0]))


def draw_nw(
    data: RegressionData, kernel: str = "gaussian", bandwidth: float = 1.0, *,
    fig: Figure | None = None,
) -> Figure:
    """Nadaraya-Watson with ``kernel`` and ``bandwidth`` σ on ``data``: fit and (Q, K) weights.

    Left: truth, the prediction ŷ = ``nadaraya_watson(...)[0]`` and the training points.
    Right: the weights on one fixed colour scale, 0 to 1 with square-root spacing (the same
    for every kernel and bandwidth, so maps compare across slider values). ``fig``: a Figure
    this function drew before (for data of the same sizes) is updated in place (fast); any
    other Figure is cleared and redrawn. Returns the Figure (not registered with pyplot).
    """
    _check_data(data)
    bandwidth = check_real("bandwidth", bandwidth, above=0)  # a number, not a 0-d tensor
    check_figure("fig", fig, optional=True)
    y_hat, weights = nadaraya_watson(data.x_train, data.y_train, data.x_test, kernel, bandwidth)
    y_hat, weights = to_numpy(y_hat), to_numpy(weights)
    if fig is None:
        fig = Figure(figsize=FIGSIZE)
    if not _is_nw_figure(fig, data):
        _layout_nw(fig, data)
    ax_fit, ax_map = fig.axes[0], fig.axes[1]
    ax_fit.lines[1].set_ydata(y_hat)
    mse = float(np.mean((y_hat - to_numpy(data.y_truth)) ** 2))
    # y=1.0: a title at a fixed height skips matplotlib's search for a free spot above the
    # axes on every draw (nothing is there: the same place, ~10% less drawing time).
    ax_fit.set_title(f"{kernel} kernel, bandwidth σ = {bandwidth:.3g}: test MSE {mse:.3f}",
                     fontsize="medium", y=1.0)
    set_image_data(ax_map.images[0], weights)
    ax_map.set_title(f"attention weights (largest {weights.max():.2f})", fontsize="medium",
                     y=1.0)
    return fig


def nw_view(
    data: RegressionData | None = None, kernel: str = "gaussian", bandwidth: float = 1.0,
) -> PageView:
    """Kernel and bandwidth controls → ``draw_nw`` (fit and heatmap redraw together).

    ``data`` defaults to ``make_regression_data()`` (50 training points, 50 queries). A
    ``bandwidth`` off the slider (0.01 to 10) is refused: the slider would clip it silently.
    """
    _check_data(data, optional=True)
    if not isinstance(kernel, str) or kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {kernel!r}")
    low, high = BANDWIDTHS
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, numbers.Real) \
            or not low <= bandwidth <= high:  # NaN fails too
        raise ValueError(f"bandwidth must lie on the slider, in [{low:g}, {high:g}], "
                         f"got {bandwidth!r}")
    data = make_regression_data() if data is None else data
    fig = Figure(figsize=FIGSIZE)

    def draw(kernel: str, bandwidth: float) -> Figure:
        return draw_nw(data, kernel, bandwidth, fig=fig)

    view = interactive_figure(
        draw, 
        kernel=widgets.Dropdown(options=list(KERNELS), value=kernel, description="kernel"),
        bandwidth=widgets.FloatLogSlider(value=float(bandwidth), base=10, min=-2, max=1, step=0.05,
                                         description="bandwidth σ", readout_format=".3f",
                                         continuous_update=False),
    )
    return view


def demo_views() -> dict[str, widgets.Widget]:
    """Every view of this module, as the notebook shows it (built in well under a second)."""
    return {"nw_view": nw_view()}
