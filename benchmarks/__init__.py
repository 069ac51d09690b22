"""Speed benchmarks for the series, run as scripts (``python -m benchmarks``), never as tests.

Its parts, each a module with ``run(cfg) -> list[Table]``: notebook run time and memory
(``bench_notebooks``), the kernel-side cost of a slider move (``bench_sliders``), the in-page
redraw of every view of the static site (``bench_pages``), the site's load: Lighthouse,
bytes and first-figure time (``bench_site``), the attention helpers against
PyTorch's (``bench_attention``), ``masked_softmax`` against the textbook's
(``bench_masked_softmax``) and attention at scale (``bench_scale``).
"""
